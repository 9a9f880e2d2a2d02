#!/usr/bin/python3
"""Prints 'N passed, N failed' summed over meson testlog.json files (one line per meson test).

tools/run_tests.sh passes the main build's log and the subgroup-width runs';
tools/run_tests_extended.sh those of the sanitizer, fuzz and wheel stages; .ci/run
all of them.  A log that is missing (its build failed before testing)
counts as one failed test, so the closing line never hides a broken build.
With --slowest N, the N slowest suites over all logs come first (seconds,
suite, build directory); the 'N passed, N failed' line stays the last line.
"""
import json
import os
import sys


def main() -> int:
    args = sys.argv[1:]
    slowest = 0
    if len(args) >= 2 and args[0] == '--slowest':
        slowest = int(args[1])
        args = args[2:]
    if not args:
        print('usage: test_summary.py [--slowest N] TESTLOG.json [TESTLOG.json...]', file=sys.stderr)
        return 2
    passed = failed = skipped = 0
    durations = []   # (seconds, suite, build directory)
    for path in args:
        build_dir = os.path.basename(os.path.dirname(os.path.dirname(os.path.abspath(path))))
        try:
            with open(path) as f:
                for line in f:
                    if not line.strip():
                        continue
                    t = json.loads(line)
                    r = t['result']
                    durations.append((float(t.get('duration', 0)), t.get('name', '?'), build_dir, r))
                    if r in ('OK', 'EXPECTEDFAIL'):
                        passed += 1
                    elif r == 'SKIP':
                        skipped += 1
                    else:
                        failed += 1
        except OSError as e:
            print(f'test summary: cannot read {path}: {e}; counted as 1 failed', file=sys.stderr)
            failed += 1
    if slowest and durations:
        durations.sort(key=lambda d: -d[0])
        print(f'slowest {min(slowest, len(durations))} suites:')
        for secs, name, build_dir, r in durations[:slowest]:
            print(f'  {secs:7.1f} s  {name} ({build_dir}){"" if r == "OK" else "  " + r}')
    line = f'{passed} passed, {failed} failed'
    if skipped:
        line += f', {skipped} skipped'
    sys.stdout.flush()
    print(line)
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == '__main__':
    sys.exit(main())
