#!/usr/bin/python3
"""Prints 'N passed, N failed' summed over meson testlog.json files (one line per meson test).

tools/run_tests.sh passes the main build's log and those of the sanitizer and
fuzz builds it ran.  A log that is missing (its build failed before testing)
counts as one failed test, so the closing line never hides a broken build.
"""
import json
import sys


def main() -> int:
    if len(sys.argv) < 2:
        print('usage: test_summary.py TESTLOG.json [TESTLOG.json...]', file=sys.stderr)
        return 2
    passed = failed = skipped = 0
    for path in sys.argv[1:]:
        try:
            with open(path) as f:
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
            print(f'test summary: cannot read {path}: {e}; counted as 1 failed', file=sys.stderr)
            failed += 1
    line = f'{passed} passed, {failed} failed'
    if skipped:
        line += f', {skipped} skipped'
    print(line)
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == '__main__':
    sys.exit(main())
