"""The headers `meson install` puts on a system are the whole C API: every file under include/ is
installed, at the same path under the include dir, and a C99 program that sees only the installed copies
(no source tree on its include path) compiles with each part included alone and with reach.h.

usage: test_installed_headers.py BUILD_DIR SOURCE_ROOT CC
"""
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile


def main() -> int:
    build, root, cc = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]).resolve(), sys.argv[3]
    installed = json.loads(subprocess.run(['meson', 'introspect', str(build), '--installed'], check=True,
                                          capture_output=True, text=True).stdout)
    include = root / 'include'
    sources = sorted(p.relative_to(include).as_posix() for p in include.rglob('*.h'))
    # source -> install path, for the files under include/ only
    placed = {pathlib.Path(src).resolve().relative_to(include).as_posix(): dst
              for src, dst in installed.items() if pathlib.Path(src).resolve().is_relative_to(include)}
    missing = [s for s in sources if s not in placed]
    if missing:
        print(f'not installed by meson install: {", ".join("include/" + m for m in missing)} '
              '(capi/meson.build install_headers)')
        return 1
    prefix_include = pathlib.PurePosixPath(placed['reach.h']).parent
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        staged = pathlib.Path(tmp, 'include')
        for rel, dst in placed.items():
            # same place relative to the installed reach.h as meson puts it
            where = staged / pathlib.PurePosixPath(dst).relative_to(prefix_include)
            if where.as_posix() != (staged / rel).as_posix():
                failures.append(f'include/{rel} installs to {dst}, not beside reach.h as {rel}')
            where.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(include / rel, where)
        for header in sources:
            prog = pathlib.Path(tmp, 'use.c')
            # each header alone: the declarations it needs come from its own includes
            prog.write_text(f'#include <{header}>\nint main(void) {{ return REACH_OK; }}\n')
            r = subprocess.run([cc, '-std=c99', '-pedantic', '-Wall', '-Wextra', '-Werror', '-fsyntax-only',
                                '-I', str(staged), str(prog)], capture_output=True, text=True)
            if r.returncode != 0:
                failures.append(f'<{header}> alone does not compile:\n{r.stderr}')
    for f in failures:
        print(f)
    print(f'{len(sources)} headers installed and compiling alone' if not failures else f'{len(failures)} failures')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
