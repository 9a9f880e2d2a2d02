#!/usr/bin/python3
"""tools/check_layers.py must pass a clean tree and flag every planted breach of the room rules.

Each breach is planted in a copy of a small clean tree (and one in a copy of the repository's own
sources): a bad include at any depth, a folder no rule covers, a bad or unresolvable macro include,
a GLSL include, a relative include, a quoted include that names no file, and the rooms of tests/,
tests/support, tests/fuzz, examples/ and the runtime/serve room; an OS header outside base/platform/ (which
includes only base/) and not in OS_EXEMPT; a CLI or C API that does not use the
serving engine (runtime/serve); include cycles between modules of server/ and of runtime/serve/; and a
typo in ROOMS itself.  The clean tree passes, and so does it without runtime/serve/ (a room's rules,
its `uses` by others too, may come before its folder).
"""
import pathlib
import shutil
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[2]
CHECKER = REPO / 'tools' / 'check_layers.py'
sys.path.insert(0, str(CHECKER.parent))
import check_layers  # noqa: E402

# A tree that follows the rules: cli/, capi/ and server/ each include runtime/serve/ (their `uses`);
# server/ and runtime/serve/ include one way (acyclic); runtime/text/'s a <-> a_impl split is a cycle, where
# none is checked.
CLEAN = {
    'base/error.hpp': '#pragma once\n#include <string>\n',
    'base/wtype_list.h': 'WTYPE(f32, 0)\n',
    'runtime/formats/gguf.hpp': '#include "base/error.hpp"\n',
    'runtime/text/a.cpp': '#include "runtime/formats/gguf.hpp"\n#include "base/error.hpp"\n#include <string>\n'
                          '#include "a_impl.hpp"\n',                       # relative to its own folder
    'runtime/text/a_impl.hpp': '#pragma once\n',
    'runtime/text/a.hpp': '#pragma once\n',
    'runtime/text/a_impl.cpp': '#include "a.hpp"\n#include "a_impl.hpp"\n',   # a <-> a_impl: not checked here
    'engine/device.hpp': '#include <vulkan/vulkan.h>\n#include "shaders/embedded_shaders.hpp"\n',  # generated
    'engine/deep/er/e.cpp': '#include "engine/device.hpp"\n#include "../../device.hpp"\n',
    'kernels/spec.hpp': '#define REACH_SPEC_FILE "shaders/spec/norm.h"\n#include "kernels/spec_struct.inc"\n'
                        '#define REACH_SPEC_FILE "shaders/spec/embed.h"\n#include "kernels/spec_struct.inc"\n',
    'kernels/spec_struct.inc': 'struct S {\n#include REACH_SPEC_FILE\n};\n#undef REACH_SPEC_FILE\n',
    'kernels/push.inc': '#define REACH_PUSH_FILE "shaders/spec/norm.h"\n#include REACH_PUSH_FILE\n',
    'shaders/spec/norm.h': '#include "common.h"\n',                          # shaders/spec/common.h
    'shaders/spec/common.h': 'SPEC_WG(wg)\n',
    'shaders/spec/embed.h': '#include "norm.h"\n',
    'shaders/common.glsl': '#include "base/wtype_list.h"\n',
    'shaders/norm_rms.comp': '#version 450\n#include "common.glsl"\n#include "spec/norm.h"\n',
    'runtime/session/session.hpp': '#include "kernels/spec.hpp"\n#include "runtime/text/a_impl.hpp"\n',
    'server/s.hpp': '#pragma once\n#include "runtime/serve/engine.hpp"\n',
    'server/s.cpp': '#include "s.hpp"\n#include "runtime/session/session.hpp"\n#include "server/t.hpp"\n',
    'server/t.hpp': '#pragma once\n',
    'runtime/serve/engine.hpp': '#include "runtime/session/session.hpp"\n#include "request.hpp"\n',
    'runtime/serve/engine.cpp': '#include "runtime/serve/engine.hpp"\n#include "runtime/serve/request.hpp"\n',
    'runtime/serve/request.hpp': '#pragma once\n',
    'capi/c.cpp': '#include "include/reach.h"\n#include "runtime/serve/request.hpp"\n',
    'include/reach.h': '#include <stdint.h>\n',
    'examples/ex.c': '#include <reach.h>\n#include <stdio.h>\n',
    'cli/main.cpp': '#include "server/s.cpp"\n',
    'cli/cmd_run.cpp': '#include "runtime/serve/engine.hpp"\n',
    'tools/bench.cpp': '#include "kernels/spec.hpp"\n',
    'tests/support/fixtures.hpp': '#include "runtime/session/session.hpp"\n',
    'tests/test_all.cpp': '#include "tests/support/fixtures.hpp"\n#include "cli/main.cpp"\n#include "include/reach.h"\n',
    'tests/fuzz/fuzz_gguf.cpp': '#include "runtime/formats/gguf.hpp"\n',
    'docs/notes.md': '#include "kernels/spec.hpp" in prose is not code\n',
    # OS headers: base/platform/ alone includes them, and the files of OS_EXEMPT; <csignal> is standard C++.
    'base/platform/file.cpp': '#include <unistd.h>\n#include <sys/mman.h>\n#include <windows.h>\n'
                              '#include "base/error.hpp"\n',
    'tests/support/isolated_run.cpp': '#include <sys/resource.h>\n#include "tests/support/fixtures.hpp"\n',
    'cli/signals.cpp': '#include <csignal>\n#include <cstdio>\n#include "base/platform/file.cpp"\n',
}

# The clean tree before runtime/serve/ exists: its room's rules and the `uses` of it are no error yet.
SERVE_FILES = [f for f in CLEAN if f.startswith('runtime/serve/')]
BEFORE_SERVE = {f: ''.join(line for line in text.splitlines(True) if 'runtime/serve/' not in line)
                for f, text in CLEAN.items()}

# name -> (files added to the clean tree, text the report must hold)
BREACHES = {
    'bad include': ({'runtime/formats/f.cpp': '#include "kernels/spec.hpp"\n'}, 'runtime/formats/f.cpp:1'),
    'bad include, deep': ({'runtime/text/a/b/c/t.hpp': '#include "engine/device.hpp"\n'},
                          'runtime/text/a/b/c/t.hpp:1'),
    'Vulkan in base': ({'base/b.hpp': '#include <vulkan/vulkan.h>\n'}, 'base/b.hpp:1'),
    'engine knows no model': ({'engine/e.cpp': '  #  include "runtime/session/session.hpp"\n'}, 'engine/e.cpp:1'),
    'server goes through runtime': ({'server/t.cpp': '#include "kernels/spec.hpp"\n'}, 'server/t.cpp:1'),
    'unlisted folder': ({'newroom/x.cpp': 'int x;\n'}, 'newroom/x.cpp: under no rule'),
    'unlisted room in runtime': ({'runtime/newroom/x.hpp': '#include "base/error.hpp"\n'},
                                 'runtime/newroom/x.hpp: under no rule (runtime/ holds no source'),
    'source at the top': ({'x.c': 'int x;\n'}, 'x.c: under no rule'),
    'bad macro include': ({'kernels/bad.hpp': '#define REACH_SPEC_FILE "runtime/session/session.hpp"\n'
                                              '#include "kernels/spec_struct.inc"\n'},
                          'is runtime/session/session.hpp: kernels/'),
    'macro include of a definer in another room': (
        {'runtime/config/c.hpp': '#define REACH_SPEC_FILE "shaders/spec/norm.h"\n#include "kernels/spec_struct.inc"\n'},
        'runtime/config/c.hpp'),
    'bad macro include, defined two includes up': (
        {'kernels/outer.hpp': '#define REACH_SPEC_FILE "runtime/text/a_impl.hpp"\n#include "kernels/middle.hpp"\n',
         'kernels/middle.hpp': '#include "kernels/spec_struct.inc"\n'},
        'is runtime/text/a_impl.hpp: kernels/'),
    'macro include from a -D define': ({'kernels/d.inc': '#include REACH_D_FILE\n',
                                        'kernels/meson.build': "args = ['-DREACH_D_FILE=\"engine/device.hpp\"']\n",
                                        'runtime/formats/d.cpp': '#include REACH_D_FILE\n'},
                                       'runtime/formats/d.cpp:1: #include REACH_D_FILE ("engine/device.hpp" from a '
                                       'meson.build -D define)'),
    'unresolvable macro include': ({'kernels/m.inc': '#include REACH_NOWHERE_FILE\n'},
                                   'kernels/m.inc:1: #include REACH_NOWHERE_FILE: no #define'),
    'GLSL include out of shaders': ({'shaders/x.glsl': '#include "engine/device.hpp"\n'}, 'shaders/x.glsl:1'),
    'spec list out of shaders': ({'shaders/spec/y.h': '#include "../../kernels/spec.hpp"\n'}, 'shaders/spec/y.h:1'),
    'relative include out of the room': ({'runtime/text/r.cpp': '#include "../session/session.hpp"\n'},
                                         'runtime/text/r.cpp:1'),
    'include of no file': ({'runtime/text/n.cpp': '#include "runtime/text/missing.hpp"\n'},
                           'runtime/text/n.cpp:1: "runtime/text/missing.hpp" names no file'),
    'example beyond the C API': ({'examples/e.cpp': '#include <engine/device.hpp>\n'}, 'examples/e.cpp:1'),
    'tools bench reaching the model': ({'tools/b.cpp': '#include "runtime/session/session.hpp"\n'}, 'tools/b.cpp:1'),
    'support reaching the server': ({'tests/support/s.cpp': '#include "server/s.cpp"\n'}, 'tests/support/s.cpp:1'),
    'support reaching a suite': ({'tests/support/t.cpp': '#include "tests/test_all.cpp"\n'}, 'tests/support/t.cpp:1'),
    'suites share through support': ({'tests/test_b.cpp': '#include "tests/test_all.cpp"\n'}, 'tests/test_b.cpp:1'),
    'fuzz target with Vulkan': ({'tests/fuzz/f.cpp': '#include <vulkan/vulkan.h>\n'}, 'tests/fuzz/f.cpp:1'),
    'fuzz target with kernels': ({'tests/fuzz/g.cpp': '#include "kernels/spec.hpp"\n'}, 'tests/fuzz/g.cpp:1'),
    'OS header in runtime': ({'runtime/formats/m.cpp': '#include <unistd.h>\n'},
                             'runtime/formats/m.cpp:1: <unistd.h> is an OS header'),
    'OS header in base, outside platform': ({'base/b.cpp': '#include <fcntl.h>\n'},
                                            'base/b.cpp:1: <fcntl.h> is an OS header'),
    'Windows header in the CLI, any case': ({'cli/w.cpp': '#include <Windows.h>\n'},
                                            'cli/w.cpp:1: <Windows.h> is an OS header'),
    'sys/ header in a suite': ({'tests/test_m.cpp': '#  include <sys/mman.h>\n'},
                               'tests/test_m.cpp:1: <sys/mman.h> is an OS header'),
    'OS header in a file beside an exempt one': ({'tests/support/other_run.cpp': '#include <sys/resource.h>\n'},
                                                 'tests/support/other_run.cpp:1: <sys/resource.h> is an OS header'),
    'platform room above base': ({'base/platform/p.cpp': '#include "runtime/formats/gguf.hpp"\n'},
                                 'base/platform/p.cpp:1: "runtime/formats/gguf.hpp" is runtime/formats/gguf.hpp: '
                                 'base/platform/ may include only base/'),
    'serve room below the protocol': ({'runtime/serve/r.cpp': '#include "server/s.cpp"\n'}, 'runtime/serve/r.cpp:1'),
    # Each of cli/, capi/ and server/ uses the serving engine (a file that replaces the clean one).
    'CLI without the serving engine': ({'cli/cmd_run.cpp': '#include "runtime/session/session.hpp"\n'},
                                       'cli/: must use runtime/serve/'),
    'C API without the serving engine': ({'capi/c.cpp': '#include "include/reach.h"\n'},
                                         'capi/: must use runtime/serve/'),
    'server without the serving engine': ({'server/s.hpp': '#pragma once\n'}, 'server/: must use runtime/serve/'),
    # No two modules of server/ or runtime/serve/ include each other, directly or through others.
    'server modules including each other through their .cpp': (
        {'server/a.hpp': '#pragma once\n', 'server/a.cpp': '#include "server/a.hpp"\n#include "server/b.hpp"\n',
         'server/b.hpp': '#pragma once\n', 'server/b.cpp': '#include "b.hpp"\n#include "a.hpp"\n'},
        'server/a.cpp:2: include cycle server/a -> server/b -> server/a (server/a.cpp:2 includes server/b.hpp; '
        'server/b.cpp:2 includes server/a.hpp): no two modules of server/'),
    'three-module cycle in runtime/serve': (
        {'runtime/serve/x.hpp': '#pragma once\n#include "y.hpp"\n', 'runtime/serve/y.hpp': '#pragma once\n',
         'runtime/serve/y.cpp': '#include "y.hpp"\n#include "runtime/serve/z.hpp"\n',
         'runtime/serve/z.hpp': '#pragma once\n#include "runtime/session/session.hpp"\n#include "x.hpp"\n'},
        'runtime/serve/x.hpp:2: include cycle runtime/serve/x -> runtime/serve/y -> runtime/serve/z -> '
        'runtime/serve/x (runtime/serve/x.hpp:2 includes runtime/serve/y.hpp; runtime/serve/y.cpp:2 includes '
        'runtime/serve/z.hpp; runtime/serve/z.hpp:3 includes runtime/serve/x.hpp): no two modules of runtime/serve/'),
    'two serve headers including each other': (
        {'runtime/serve/request.hpp': '#pragma once\n#include "runtime/serve/engine.hpp"\n'},
        'runtime/serve/engine.cpp:2: include cycle runtime/serve/engine -> runtime/serve/request -> '
        'runtime/serve/engine (runtime/serve/engine.cpp:2 includes runtime/serve/request.hpp, '
        'runtime/serve/engine.hpp:2 includes runtime/serve/request.hpp; runtime/serve/request.hpp:2 includes '
        'runtime/serve/engine.hpp)'),
}


def write(d: pathlib.Path, files: dict):
    for name, text in files.items():
        p = d / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def run(d: pathlib.Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(CHECKER), str(d)], capture_output=True, text=True)


def main() -> int:
    failures = []
    cases = len(BREACHES)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        clean = tmp / 'clean'
        write(clean, CLEAN)
        r = run(clean)
        cases += 1
        if r.returncode != 0:
            failures.append(f'clean tree rejected: {r.stdout}')
        before = tmp / 'before_serve'
        write(before, {f: t for f, t in BEFORE_SERVE.items() if f not in SERVE_FILES})
        r = run(before)
        cases += 1
        if r.returncode != 0 or (before / 'runtime/serve').exists():
            failures.append(f'the clean tree without runtime/serve/ rejected: {r.stdout}')
        for i, (what, (files, expect)) in enumerate(BREACHES.items()):
            d = tmp / f'breach{i}'
            shutil.copytree(clean, d)
            write(d, files)
            r = run(d)
            if r.returncode != 1 or expect not in r.stdout:
                failures.append(f'{what}: not reported as {expect!r} (exit {r.returncode}): {r.stdout!r}')

        # The repository's own sources: they pass, and a breach planted among them fails.
        repo = tmp / 'repo'
        for rel in check_layers.source_files(REPO):
            if rel.endswith(check_layers.SOURCE + ('meson.build',)):
                (repo / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(REPO / rel, repo / rel)
        r = run(repo)
        cases += 1
        if r.returncode != 0:
            failures.append(f'a copy of the repository rejected: {r.stdout}')
        spec = repo / 'kernels/spec.hpp'
        spec.write_text(spec.read_text().replace('"shaders/spec/norm.h"', '"runtime/session/session.hpp"', 1))
        r = run(repo)
        cases += 1
        if r.returncode != 1 or 'kernels/spec_struct.inc' not in r.stdout or 'runtime/session/session.hpp' not in r.stdout:
            failures.append(f'the repository with a planted macro breach passed (exit {r.returncode}): {r.stdout!r}')
    # Each OS_EXEMPT entry names a file of the repository that still includes an OS header.
    for rel, why in check_layers.OS_EXEMPT.items():
        cases += 1
        path = REPO / rel
        lines = path.read_text(encoding='utf-8').splitlines() if path.is_file() else []
        if not any((m := check_layers.INCLUDE.match(line)) and m.group(1) == '<' and check_layers.os_header(m.group(2))
                   for line in lines):
            failures.append(f'OS_EXEMPT names {rel} ({why}), which is no file or includes no OS header: remove it')
    # A typo in ROOMS allows nothing, silently: the checker names it.
    rooms = check_layers.ROOMS
    check_layers.ROOMS = rooms + [check_layers.Room('runtime/new/', 'a new room', ('base/', 'runtime/sesion/'))]
    cases += 1
    if not any('runtime/sesion/' in b for b in check_layers.check_rooms()):
        failures.append('a ROOMS entry naming no room passed')
    # A room must use only what it may include, and a `uses` entry must be a room.
    for uses, expect in ((('kernels/',), 'tools/check_layers.py: runtime/new/ must use kernels/, which it may not'),
                         (('runtime/sesion/',), 'runtime/new/ must use runtime/sesion/, which is no room')):
        check_layers.ROOMS = rooms + [check_layers.Room('runtime/new/', 'a new room', ('base/', 'runtime/new/'),
                                                        uses=uses)]
        cases += 1
        if not any(expect in b for b in check_layers.check_rooms()):
            failures.append(f'a ROOMS `uses` entry not reported as {expect!r}')
    check_layers.ROOMS = rooms
    for f in failures:
        print('FAIL', f)
    print(f'test_check_layers: {cases - len(failures)} of {cases} cases as expected')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
