#!/usr/bin/python3
"""The README against the CLI's --help texts, so that the two stay in step.

  * every flag the README gives a `reach COMMAND` (in a command line or an inline `reach COMMAND ...`)
    is an option in `reach COMMAND --help`;
  * every flag the README shows on its own (an inline `--flag ...`) is an option of some command, or
    one of the few flags of other programs the README quotes (FOREIGN_FLAGS);
  * `reach --help` lists every command and every variable of the README's Environment table, and every
    command it lists has a --help of its own;
  * within one command's --help, a flag is described on one line only (no option twice), and the
    option lines of a block start their descriptions at one column;
  * a flag the top-level usage shows for a command is in that command's --help;
  * the other way round, each command's own options (above the shared position-scheme block) are
    named somewhere in the README, by one of their spellings (-m or --model); scheme flags the
    README never names are listed as a note.

usage: /usr/bin/python3 tests/python/test_cli_help.py [REACH] [README]
       (default build/cli/reach and README.md of the source tree; standard library only)
"""
import os
import re
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COMMANDS = ["info", "selftest", "run", "bench", "eval", "quantize", "serve"]
# Flags of other programs that the README quotes on their own: llama-perplexity's (the ppl section).
FOREIGN_FLAGS = {"-b": "llama-perplexity --batch-size", "-c": "llama-perplexity --ctx-size",
                 "--parse-special": "llama-perplexity"}
FLAG = re.compile(r"(?<![\w./$-])(--?[A-Za-z][A-Za-z0-9_-]*)")


def help_text(reach, args):
    r = subprocess.run([reach] + args, capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout, r.stderr


def option_flags(text):
    """The flags a --help text defines, each with the lines that open with it ("  -m, --model DIR  ...";
    -h / --help always).  A flag after a column gap of 3+ spaces ("--top-k K ...   --top-p P ...") is
    defined there too, without a line of its own."""
    flags = {"-h": [], "--help": []}
    for n, line in enumerate(text.splitlines(), 1):
        for m in FLAG.finditer(line):
            before = line[:m.start()]
            if re.fullmatch(r" {1,4}(--?[\w-]+, )?", before):   # deeper: a description's next line
                flags.setdefault(m.group(1), []).append(n)
            elif before.endswith("   "):
                flags.setdefault(m.group(1), [])
    return flags


def own_options(text):
    """The command's own options, as alias groups ({"-m", "--model"}): the flags opening the option
    lines above the shared "position schemes" block (those the README names as a group)."""
    groups = []
    for line in text.splitlines():
        if line.startswith("position schemes"):
            break
        m = re.match(r" {1,4}(--?[A-Za-z][\w-]*)(?:, (--?[A-Za-z][\w-]*))?", line)
        if m:
            groups.append({f for f in m.groups() if f})
    return groups


def misaligned_options(text):
    """Option lines ("  --flag ARG   description") whose description starts at another column than
    most option lines of the same block (a block: the lines under one unindented heading line)."""
    blocks, block = [], []
    for n, line in enumerate(text.splitlines(), 1):
        if line and not line.startswith(" "):
            blocks.append(block)
            block = []
        m = re.match(r"(  -\S.*?)(\s{2,})(\S)", line)
        if m and re.match(r"  --?[A-Za-z]", line):
            block.append((n, len(m.group(1)), m.start(3)))
    blocks.append(block)
    bad = []
    for block in blocks:
        columns = [col for _, _, col in block]
        if len(columns) < 3:
            continue
        usual = max(set(columns), key=columns.count)
        # A flag longer than the column may push its description on; a shorter one lines up.
        bad += [n for n, flag_end, col in block if col != usual and flag_end < usual - 1]
    return bad


def readme_invocations(readme):
    """(line number, command, [flags]) for every `reach COMMAND ...` of the README: in ``` blocks
    (with \\-continued lines joined) and in inline code spans."""
    out = []
    lines = readme.splitlines()
    in_block, block_is_shell = False, False
    pending, pending_no = "", 0
    texts = []   # (line number, text that may hold a command)
    for no, line in enumerate(lines, 1):
        if line.startswith("```"):
            in_block = not in_block
            block_is_shell = in_block and line.strip() in ("```sh", "```bash", "```")
            continue
        if in_block:
            if not block_is_shell:
                continue
            if pending:
                pending += " " + line.strip()
            else:
                pending, pending_no = line.strip(), no
            if pending.endswith("\\"):
                pending = pending[:-1]
                continue
            texts.append((pending_no, pending))
            pending = ""
        else:
            for span in re.findall(r"`([^`]+)`", line):
                texts.append((no, span))
    cmd_re = re.compile(r"(?:^|[\s;&|(])(?:\./build/cli/)?reach\s+(" + "|".join(COMMANDS) + r")\b(.*)")
    for no, text in texts:
        m = cmd_re.search(text)
        if not m:
            continue
        rest = m.group(2)
        try:
            words = shlex.split(rest, comments=True)
        except ValueError:
            words = rest.split()
        flags = []
        for w in words:
            if w in ("|", "||", "&&", ";", ">", "2>", "<") or w.startswith((">", "2>", "|")):
                break
            f = FLAG.fullmatch(w.split("=", 1)[0])
            if f:
                flags.append(f.group(1))
        out.append((no, m.group(1), flags))
    return out


def readme_bare_flags(readme):
    """(line number, flag) for each inline code span that starts with a flag: `--full-kv`, `-o json`."""
    out = []
    in_block = False
    for no, line in enumerate(readme.splitlines(), 1):
        if line.startswith("```"):
            in_block = not in_block
            continue
        if in_block:
            continue
        for span in re.findall(r"`([^`]+)`", line):
            m = FLAG.match(span.strip())
            if m and m.end() == len(span.strip()) or (m and not span.strip()[m.end()].isalnum()):
                out.append((no, m.group(1)))
    return out


def main():
    reach = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "cli", "reach")
    readme_path = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "README.md")
    readme = open(readme_path, encoding="utf-8").read()
    errors = []

    rc, top, _ = help_text(reach, ["--help"])
    if rc != 0:
        errors.append(f"reach --help exited {rc}")
    listed = [c for c in COMMANDS if re.search(r"^  " + c + r"\b", top, re.M)]
    helps, owns = {}, {}
    for cmd in COMMANDS:
        rc, text, err = help_text(reach, [cmd, "--help"])
        if rc != 0:
            errors.append(f"reach {cmd} --help exited {rc}: {err.strip()}")
            continue
        helps[cmd] = option_flags(text)
        owns[cmd] = own_options(text)
        if cmd not in listed:
            errors.append(f"reach --help does not list the command '{cmd}'")
        if not re.search(r"(?:\./build/cli/)?reach " + cmd + r"\b", readme):
            errors.append(f"the README never shows `reach {cmd}`")
        for n in misaligned_options(text):
            errors.append(f"reach {cmd} --help line {n} does not line up with its other options: "
                          f"{text.splitlines()[n - 1].strip()}")
        for flag, at in sorted(helps[cmd].items()):
            if len(at) > 1:
                errors.append(f"reach {cmd} --help describes {flag} {len(at)} times (lines {at})")

    # The flags the top-level usage shows for a command are in that command's --help.
    for line in top.splitlines():
        m = re.match(r"  (" + "|".join(COMMANDS) + r")\b(.*)", line)
        if m and m.group(1) in helps:
            for flag in FLAG.findall(m.group(2)):
                if flag not in helps[m.group(1)]:
                    errors.append(f"reach --help shows {m.group(1)} {flag}, which reach {m.group(1)} --help lacks")

    # The Environment table's variables are in the top-level usage.
    for var in re.findall(r"^\| `(REACH_[A-Z_]+)", readme, re.M):
        if var not in top:
            errors.append(f"reach --help lists no {var} (the README's Environment table has it)")

    checked = 0
    mentioned = set()
    for no, cmd, flags in readme_invocations(readme):
        if cmd not in helps:
            continue
        for flag in flags:
            checked += 1
            mentioned.add((cmd, flag))
            if flag not in helps[cmd]:
                errors.append(f"README.md:{no}: `reach {cmd} ... {flag}`: {flag} is not in reach {cmd} --help")

    any_help = set().union(*[set(h) for h in helps.values()]) if helps else set()
    for no, flag in readme_bare_flags(readme):
        checked += 1
        if flag not in any_help and flag not in FOREIGN_FLAGS:
            errors.append(f"README.md:{no}: `{flag}` is an option of no reach command's --help")

    # The other direction: each command's own options are named somewhere in the README (by one of
    # their spellings); the position-scheme flags, which the README names as a group, only as a note.
    readme_flags = set(FLAG.findall(readme))
    for cmd in sorted(helps):
        for group in owns[cmd]:
            if not group & readme_flags:
                errors.append(f"reach {cmd} --help has {' / '.join(sorted(group))}, which the README never names")
        own = set().union(*owns[cmd]) if owns[cmd] else set()
        unnamed = sorted(f for f in helps[cmd] if f not in readme_flags and f not in own and f not in ("-h", "--help"))
        if unnamed:
            print(f"note: reach {cmd} --help scheme options the README does not name: {' '.join(unnamed)}")

    if checked < 50:
        errors.append(f"only {checked} README flags found: the README parsing is broken")
    for e in errors:
        print("FAIL:", e)
    print(f"{checked} README flags checked against the --help of {len(helps)} commands; {len(errors)} problem(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
