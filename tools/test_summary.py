#!/usr/bin/python3
"""Prints 'N passed, N failed' from meson's testlog.json (one line per meson test)."""
import json
import sys


def main() -> int:
    passed = failed = skipped = 0
    try:
        with open(sys.argv[1]) as f:
            for line in f:
                if not line.strip():
                    continue
                r = json.loads(line)['result']
                if r in ('OK', 'EXPECTEDFAIL'):
                    passed += 1
                elif r == 'SKIP':
                    skipped += 1
                else:
                    failed += 1
    except OSError as e:
        print(f'test summary: cannot read {sys.argv[1]}: {e}', file=sys.stderr)
        return 1
    line = f'{passed} passed, {failed} failed'
    if skipped:
        line += f', {skipped} skipped'
    print(line)
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == '__main__':
    sys.exit(main())
