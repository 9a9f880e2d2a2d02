#!/usr/bin/python3
"""Writes docs/DESIGN.md's tables from the checkers' own tables, so each fact is kept in one place.

  layout    the folders, what each holds and its size: ROOMS in tools/check_layers.py, the sizes
            counted (source and script lines, rounded to 0.1k lines)
  includes  what each room may include, and below it what rooms must use and which
            rooms have no include cycles: ROOMS in tools/check_layers.py
  kernel families  the families (FAMILIES in tools/check_kernel_names.py), their shaders
            (shaders/<family>_*.comp), host files (kernels/) and test suites

Each table lies in DESIGN.md between `<!-- generated: NAME ... -->` and `<!-- end generated -->`;
nothing outside those markers is touched.

  tools/design_tables.py --write [ROOT]   rewrite the tables
  tools/design_tables.py --check [ROOT]   exit 1 with a diff when DESIGN.md differs from what
                                          --write would write (a size that moved past its
                                          rounding, a room or a kernel added)

--check runs in .ci/run and as the test design_tables.
"""
import difflib
import pathlib
import re
import sys
import textwrap

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import check_kernel_names  # noqa: E402
import check_layers  # noqa: E402

WIDTH = 80
COUNTED = check_layers.SOURCE + ('.py', '.sh')   # what the layout's sizes count
REGION = re.compile(r'(<!-- generated: ([\w ]+?)(?: \(.*?\))? -->\n)(.*?)(<!-- end generated -->)', re.S)
LABELS = {check_layers.SHADER_IDS: 'the generated ShaderId header', 'runtime/': 'runtime/*'}


def parent_of(room, rooms):
    """The row the room is drawn under (runtime/formats/ under runtime/), or None."""
    above = [r for r in rooms if r is not room and r.folder.endswith('/') and room.folder.startswith(r.folder)]
    return max(above, key=lambda r: len(r.folder)) if above else None


def sizes(root: pathlib.Path) -> dict:
    """folder -> lines of source and scripts in it, not counting the folders of rows below it."""
    lines = {}
    for rel in check_layers.source_files(root):
        if not rel.endswith(COUNTED):
            continue
        room = check_layers.room_of(rel)
        if room is not None and room.includes is not None:
            text = (root / rel).read_text(encoding='utf-8', errors='replace')
            lines[room.folder] = lines.get(room.folder, 0) + text.count('\n') + (0 if text.endswith('\n') or not text else 1)
    return lines


# A written size stands while it is within this of the count (--check), so that everyday edits do not
# make the check fail; --write writes the counts.  A size a release behind (a room grown by a tenth or
# more) still fails.
def size_stands(written_k: float, lines: int) -> bool:
    return abs(written_k * 1000 - lines) <= max(150, 0.1 * lines)


WRITTEN_SIZE = re.compile(r'^(\s*)(\S+)\s+(\d+\.\d)k  ', re.M)


def layout(root: pathlib.Path, current: str = '') -> str:
    rooms = check_layers.ROOMS
    counted = sizes(root)
    # The sizes the current table gives, by row name (with its indent): kept where they still stand.
    written = {(m.group(1), m.group(2)): float(m.group(3)) for m in WRITTEN_SIZE.finditer(current)}
    out = ['```']
    for room in rooms:
        parent = parent_of(room, rooms)
        depth = 0
        p = parent
        while p is not None:
            depth += 1
            p = parent_of(p, rooms)
        name = '  ' * depth + (room.folder[len(parent.folder):] if parent else room.folder)
        size = ''
        if room.folder in counted:
            old = written.get(('  ' * depth, name.strip()))
            kept = old is not None and size_stands(old, counted[room.folder])
            size = f'{old if kept else counted[room.folder] / 1000:.1f}k'
        head = f'{name:<14}{size:>5}  ' + '  ' * depth
        for i, line in enumerate(textwrap.wrap(room.about, WIDTH - len(head))):
            out.append((head if i == 0 else ' ' * len(head)) + line)
    out.append('```')
    return '\n'.join(out) + '\n'


def short(entry: str) -> str:
    if entry in LABELS:
        return LABELS[entry]
    if entry.startswith('runtime/') and entry.count('/') == 2:
        return entry[len('runtime/'):-1]
    return entry.rstrip('/')


def may_include(room, before) -> str:
    """room's includes, where it takes all of an earlier row's: 'as that row/'."""
    own = set(room.includes)
    whole = [r for r in before if r.includes is not None and len(r.includes) > 1 and r.folder in own and
             set(r.includes) <= own]
    whole = [r for r in whole if not any(o is not r and set(r.includes) < set(o.includes) for o in whole)]
    taken = set().union(*(r.includes for r in whole))
    rest = [short(e) for e in room.includes if e not in taken]
    if not whole:
        return ', '.join(rest)
    return f'as {" and ".join(r.folder for r in whole)}' + (', + ' + ', '.join(rest) if rest else '')


def names(items: list) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return ', '.join(items[:-1]) + ' and ' + items[-1] if len(items) > 1 else ''.join(items)


def includes(root: pathlib.Path) -> str:
    out = ['| folder | may include | Vulkan | why |', '|---|---|---|---|']
    rooms = check_layers.ROOMS
    for i, room in enumerate(rooms):
        if room.includes is not None:
            out.append(f'| {room.folder} | {may_include(room, rooms[:i])} | {"yes" if room.vulkan else "no"} | '
                       f'{room.why} |')
    # The rules on whole rooms: `uses` and `acyclic`.
    users = {}
    for room in rooms:
        for folder in room.uses:
            users.setdefault(folder, []).append(room.folder)
    said = [f'{names(by)} must use {folder}: at least one file of {"each" if len(by) > 1 else "it"} includes a '
            f'file of {folder}.' for folder, by in users.items()]
    acyclic = [r.folder for r in rooms if r.acyclic]
    if acyclic:
        said.append(f'In {names(acyclic)} no two modules (a file\'s path less its extension) include each '
                    f'other, directly or through others.')
    if said:
        out += [''] + textwrap.wrap(' '.join(said), WIDTH)
    return '\n'.join(out) + '\n'


def kernel_families(root: pathlib.Path) -> str:
    stems = sorted(p.stem for p in (root / 'shaders').glob('*.comp'))
    hosts = sorted(p.stem for p in (root / 'kernels').glob('*.cpp')
                   if p.name not in check_kernel_names.INFRASTRUCTURE)
    out = ['| family | shaders/ (.comp) | kernels/ (.cpp) | tests/ suites (test_<suite>.cpp) |', '|---|---|---|---|']
    for prefix in check_kernel_names.FAMILIES:
        family = prefix.rstrip('_')
        own_stems = [s for s in stems if s.startswith(prefix)]
        own_hosts = [h for h in hosts if h == family or h.startswith(family + '_')]
        out.append(f'| {family} | {", ".join(own_stems)} | {", ".join(own_hosts)} | '
                   f'{", ".join("kernels_" + h for h in own_hosts)} |')
    return '\n'.join(out) + '\n'


TABLES = {'layout': layout, 'includes': includes, 'kernel families': kernel_families}


def generate(root: pathlib.Path, text: str, keep_sizes: bool = False) -> str:
    seen = set()

    def fill(m):
        name = m.group(2)
        if name not in TABLES:
            raise SystemExit(f'design_tables: docs/DESIGN.md names a table "{name}" there is no generator for')
        seen.add(name)
        if name == 'layout' and keep_sizes:
            return m.group(1) + layout(root, m.group(3)) + m.group(4)
        return m.group(1) + TABLES[name](root) + m.group(4)

    new = REGION.sub(fill, text)
    missing = set(TABLES) - seen
    if missing:
        raise SystemExit(f'design_tables: docs/DESIGN.md has no <!-- generated: NAME --> region for '
                         f'{", ".join(sorted(missing))}')
    return new


def main() -> int:
    args = [a for a in sys.argv[1:] if not a.startswith('--')]
    modes = [a for a in sys.argv[1:] if a.startswith('--')]
    if modes not in (['--write'], ['--check']) or len(args) > 1:
        print(__doc__)
        return 2
    root = pathlib.Path(args[0] if args else pathlib.Path(__file__).resolve().parent.parent)
    design = root / 'docs' / 'DESIGN.md'
    text = design.read_text(encoding='utf-8')
    new = generate(root, text, keep_sizes=modes == ['--check'])
    if modes == ['--write']:
        if new != text:
            design.write_text(new, encoding='utf-8')
            print('design_tables: docs/DESIGN.md rewritten')
        else:
            print('design_tables: docs/DESIGN.md is up to date')
        return 0
    if new != text:
        sys.stdout.writelines(difflib.unified_diff(text.splitlines(True), new.splitlines(True),
                                                   'docs/DESIGN.md', 'docs/DESIGN.md (generated)'))
        print('design_tables: docs/DESIGN.md differs from the checkers\' tables: run tools/design_tables.py --write')
        return 1
    print(f'design_tables: docs/DESIGN.md\'s {len(TABLES)} generated tables are up to date')
    return 0


if __name__ == '__main__':
    sys.exit(main())
