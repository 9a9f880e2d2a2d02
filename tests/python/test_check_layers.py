#!/usr/bin/python3
"""tools/check_layers.py must flag a breach of the room rules and pass a clean tree."""
import pathlib
import subprocess
import sys
import tempfile

CHECKER = pathlib.Path(__file__).resolve().parents[2] / 'tools' / 'check_layers.py'


def run(files: dict) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as d:
        for name, text in files.items():
            p = pathlib.Path(d) / name
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
        return subprocess.run([sys.executable, str(CHECKER), d], capture_output=True, text=True)


def main() -> int:
    failures = []
    clean = run({'runtime/text/a.cpp': '#include "runtime/formats/gguf.hpp"\n#include "base/error.hpp"\n#include <string>\n',
                 'kernels/k.cpp': '#include "engine/device.hpp"\n#include <vulkan/vulkan.h>\n'})
    if clean.returncode != 0:
        failures.append(f'clean tree rejected: {clean.stdout}')
    cases = {
        'runtime/formats/f.cpp': '#include "kernels/kernels.hpp"\n',        # formats -> kernels
        'base/b.hpp': '#include <vulkan/vulkan.h>\n',                        # base is Vulkan-free
        'runtime/config/c.cpp': '#include "runtime/text/tokenizer.hpp"\n',   # config does not read text
        'engine/e.cpp': '  #  include "runtime/session/session.hpp"\n',      # engine knows no model
        'server/s.cpp': '#include "kernels/attention.hpp"\n',                # server goes through runtime
        'runtime/serve/r.cpp': '#include "server/openai_api.hpp"\n',        # the engine knows no protocol
    }
    for name, text in cases.items():
        r = run({name: text})
        if r.returncode != 1 or name not in r.stdout:
            failures.append(f'{name}: breach not reported (exit {r.returncode}): {r.stdout!r}')
    for f in failures:
        print('FAIL', f)
    print(f'test_check_layers: {len(cases) + 1 - len(failures)} of {len(cases) + 1} cases as expected')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
