#!/usr/bin/python3
"""Checks that the library does not read the environment (docs/DESIGN.md, "Settings").

The REACH_* variables are read once at an edge (the CLI, the C API when its host
sets use_environment, the test harness, the tools) with settings_from(std::getenv)
into one Settings (base/settings.hpp) that is passed down.  So no file under the
library's folders may call getenv / secure_getenv or touch environ: a program that
embeds reach would otherwise be changed by variables it never asked for.

Prints every use as FILE:LINE: the line, and exits 1 if any.  With --self-test,
checks that a planted use is caught.  Run by the test suite (meson test no_getenv).
"""
import pathlib
import re
import sys
import tempfile

LIBRARY = ['base', 'engine', 'kernels', 'runtime', 'server']
SUFFIXES = {'.cpp', '.hpp', '.h', '.c', '.inc', '.cc'}
# getenv, secure_getenv, std::getenv, environ / __environ, setenv / putenv (writing it is as bad).
USE = re.compile(r'\b(?:secure_getenv|getenv|_?_?environ|setenv|unsetenv|putenv)\b')
COMMENT = re.compile(r'^\s*(//|/?\*)')


def check(root: pathlib.Path) -> list:
    bad = []
    for folder in LIBRARY:
        for path in sorted((root / folder).rglob('*')):
            if path.suffix not in SUFFIXES or not path.is_file():
                continue
            for n, line in enumerate(path.read_text(encoding='utf-8', errors='replace').splitlines(), 1):
                if COMMENT.match(line):
                    continue
                code = line.split('//', 1)[0]
                if USE.search(code):
                    bad.append(f'{path.relative_to(root)}:{n}: {line.strip()}')
    return bad


def self_test() -> int:
    with tempfile.TemporaryDirectory() as d:
        root = pathlib.Path(d)
        (root / 'engine').mkdir()
        (root / 'engine' / 'ok.cpp').write_text('// std::getenv is read at the edges only\nint x = 0;\n')
        (root / 'runtime' / 'session').mkdir(parents=True)
        (root / 'runtime' / 'session' / 'bad.cpp').write_text('const char* v = std::getenv("REACH_X");\n')
        found = check(root)
        if len(found) != 1 or 'runtime/session/bad.cpp:1' not in found[0]:
            print('check_no_getenv self-test failed:', found)
            return 1
    print('check_no_getenv self-test: a planted getenv is caught, a comment is not')
    return 0


def main() -> int:
    if '--self-test' in sys.argv[1:]:
        return self_test()
    args = [a for a in sys.argv[1:] if not a.startswith('--')]
    root = pathlib.Path(args[0] if args else pathlib.Path(__file__).resolve().parent.parent)
    bad = check(root)
    for b in bad:
        print(b)
    if bad:
        print(f'{len(bad)} read(s) of the environment in the library: take the value from Settings '
              f'(base/settings.hpp), which the edges fill with settings_from(std::getenv)')
        return 1
    print('no environment reads in ' + ', '.join(f + '/' for f in LIBRARY))
    return 0


if __name__ == '__main__':
    sys.exit(main())
