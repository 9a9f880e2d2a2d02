#!/usr/bin/python3
"""tools/check_kernel_names.py must pass the source tree and flag each kind of drift in a copy of it."""
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHECKER = ROOT / 'tools' / 'check_kernel_names.py'


def run(mutate=None) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as d:
        tree = pathlib.Path(d)
        for part in ('shaders', 'kernels'):
            shutil.copytree(ROOT / part, tree / part, ignore=shutil.ignore_patterns('*.spv'))
        (tree / 'tests').mkdir()
        for p in [ROOT / 'tests/meson.build'] + list((ROOT / 'tests').glob('test_kernels_*.cpp')):
            shutil.copy(p, tree / 'tests' / p.name)
        if mutate:
            mutate(tree)
        return subprocess.run([sys.executable, str(CHECKER), str(tree)], capture_output=True, text=True)


def sub(path: str, old: str, new: str):
    def f(tree: pathlib.Path):
        p = tree / path
        text = p.read_text()
        assert re.search(old, text), (path, old)
        p.write_text(re.sub(old, new, text, count=1))
    return f


def main() -> int:
    failures = []
    clean = run()
    if clean.returncode != 0:
        failures.append(f'source tree rejected: {clean.stdout}')
    cases = {
        'ShaderId not the stem': (sub('shaders/meson.build', r"\['norm_softmax'", "['softmax_f32'"), 'softmax_f32'),
        'method not the stem': (sub('kernels/kernels.hpp', r'void norm_rms\(', 'void rmsnorm('), 'Kernels::norm_rms'),
        'bare binding number': (sub('shaders/norm_rms.comp', r'binding = B_Y', 'binding = 2'), 'norm_rms.comp:'),
        'test file unpaired': (lambda t: (t / 'tests/test_kernels_embed.cpp').rename(t / 'tests/test_kernels_embedding.cpp'),
                               'test_kernels_embed'),
        'no contract list': (lambda t: (t / 'shaders/spec/embed_q.h').unlink(), 'spec/embed_q.h'),
        'stem outside a family': (lambda t: (t / 'shaders/gelu.comp').write_text('#version 450\n'), 'gelu.comp'),
    }
    for what, (mutate, needle) in cases.items():
        r = run(mutate)
        if r.returncode != 1 or needle not in r.stdout:
            failures.append(f'{what}: not reported (exit {r.returncode}): {r.stdout!r}')
    for f in failures:
        print('FAIL', f)
    print(f'test_check_kernel_names: {len(cases) + 1 - len(failures)} of {len(cases) + 1} cases as expected')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
