#!/usr/bin/python3
"""Checks the include rules between reach's rooms (docs/DESIGN.md, "Layout").

Each folder may include (with #include "...") only the folders listed for it,
and the Vulkan-free rooms may not include <vulkan/...>.  Prints every
violation as FILE:LINE: the include and the rule, and exits 1 if any.
Run by .ci/run and by the test suite (meson test layers).
"""
import pathlib
import re
import sys

BASE = ['base/']
FORMATS = BASE + ['runtime/formats/']
TEXT = FORMATS + ['runtime/text/']
CONFIG = FORMATS + ['runtime/config/']
CONSTRAIN = TEXT + ['runtime/constrain/']
QUANT = TEXT + CONFIG + ['runtime/quant/']
ENGINE = BASE + ['engine/', 'shaders/embedded_shaders.hpp']
KERNELS = ENGINE + ['kernels/']
MODEL = KERNELS + QUANT + ['runtime/model/']
SESSION = MODEL + CONSTRAIN + ['runtime/session/']
# The serving engine: requests, the Scheduler, reply assembly; over sessions, protocol-free (never server/).
SERVE = CONSTRAIN + ['runtime/session/', 'runtime/serve/']
RUNTIME_ALL = BASE + ['runtime/']

# folder -> (allowed include prefixes, Vulkan headers allowed)
RULES = {
    'base/': (BASE, False),
    'runtime/formats/': (FORMATS, False),
    'runtime/text/': (TEXT, False),
    'runtime/config/': (CONFIG, False),
    'runtime/constrain/': (CONSTRAIN, False),
    'runtime/quant/': (QUANT, False),
    'runtime/model/': (MODEL, True),
    'runtime/session/': (SESSION, True),
    'runtime/serve/': (SERVE, False),
    'engine/': (ENGINE, True),
    'kernels/': (KERNELS, True),
    'server/': (RUNTIME_ALL + ['server/'], False),   # runtime/* holds runtime/serve, the engine it drives
    'capi/': (RUNTIME_ALL + ['engine/', 'capi/', 'include/'], True),
    'cli/': (SESSION + ['runtime/serve/', 'server/', 'cli/'], True),
}

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def check(root: pathlib.Path) -> list:
    bad = []
    for folder, (allowed, vulkan_ok) in RULES.items():
        for path in sorted((root / folder).glob('*')):
            if path.suffix not in ('.cpp', '.hpp', '.h', '.c', '.inc'):
                continue
            for n, line in enumerate(path.read_text(encoding='utf-8').splitlines(), 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                kind, name = m.groups()
                rel = path.relative_to(root)
                if kind == '<':
                    if name.startswith('vulkan/') and not vulkan_ok:
                        bad.append(f'{rel}:{n}: <{name}>: {folder} is Vulkan-free')
                    continue
                if not any(name.startswith(a) or name == a for a in allowed):
                    bad.append(f'{rel}:{n}: "{name}": {folder} may include only {", ".join(allowed)}')
    return bad


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
    bad = check(root)
    for b in bad:
        print(b)
    if bad:
        print(f'check_layers: {len(bad)} include(s) break the room rules (docs/DESIGN.md, "Layout")')
        return 1
    print(f'check_layers: {len(RULES)} folders follow the room rules')
    return 0


if __name__ == '__main__':
    sys.exit(main())
