#!/usr/bin/python3
"""tools/design_tables.py --check must pass the repository and fail when a generated table drifts.

Works on a copy of the repository's sources, tools and docs: a size pushed past its rounding and a
hand edit inside a generated region fail the check, --write mends both, and an edit outside the
regions is left alone; a room added to ROOMS, and a `uses` or `acyclic` dropped, show in the tables.
"""
import pathlib
import shutil
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / 'tools'))
import check_layers  # noqa: E402
import design_tables  # noqa: E402


def run(root: pathlib.Path, mode: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(root / 'tools/design_tables.py'), mode, str(root)],
                          capture_output=True, text=True)


def main() -> int:
    failures = []

    def expect(what, r, code, text=''):
        if r.returncode != code or text not in r.stdout:
            failures.append(f'{what}: exit {r.returncode}, want {code} and {text!r}: {r.stdout[-2000:]!r}')

    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        for rel in check_layers.source_files(REPO):
            if rel.endswith(design_tables.COUNTED) or rel.startswith(('docs/', 'tools/')) or rel.endswith('meson.build'):
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(REPO / rel, root / rel)
        expect('the repository', run(root, '--check'), 0)

        # 20 lines more in base/ stand (everyday edits do not fail the check); 1000 more do not.
        (root / 'base/padding.hpp').write_text('// padding\n' * 20)
        expect('base/ 20 lines larger', run(root, '--check'), 0)
        (root / 'base/padding.hpp').write_text('// padding\n' * 1000)
        expect('base/ 1000 lines larger', run(root, '--check'), 1, '+base/')
        expect('--write', run(root, '--write'), 0, 'rewritten')
        expect('after --write', run(root, '--check'), 0)

        design = root / 'docs/DESIGN.md'
        text = design.read_text()
        design.write_text(text.replace('| runtime/text/ |', '| runtime/text/ | base |', 1))
        expect('a hand edit of the include table', run(root, '--check'), 1, '-| runtime/text/ | base |')
        design.write_text(text.replace('## Layout', '## Layout of the tree', 1))
        expect('an edit outside the tables', run(root, '--check'), 0)

        # A new room is one row in ROOMS; the tables must then name it.
        layers = root / 'tools/check_layers.py'
        layers.write_text(layers.read_text().replace(
            "    Room('docs/',", "    Room('runtime/newroom/', 'a room just added', BASE + ('runtime/newroom/',)),\n"
            "    Room('docs/',", 1))
        expect('a room added to ROOMS', run(root, '--check'), 1, '| runtime/newroom/ |')
        # The rules on whole rooms (`uses`, `acyclic`) are written below the include table.
        text = layers.read_text()
        layers.write_text(text.replace("True, uses=(SERVE_ROOM,)),", "True),", 1))
        expect('a `uses` dropped from ROOMS', run(root, '--check'), 1, '+server/ and cli/ must use runtime/serve/')
        layers.write_text(text.replace("acyclic=True),", "),", 1))
        expect('an `acyclic` dropped from ROOMS', run(root, '--check'), 1,
               '+includes a file of runtime/serve/. In server/ ')
    for f in failures:
        print('FAIL', f)
    print(f'test_design_tables: {9 - len(failures)} of 9 cases as expected')
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
