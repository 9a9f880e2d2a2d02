#!/usr/bin/env python3
"""The C# binding's suite: compiles bindings/csharp and tests/csharp/*.cs with Mono's mcs, takes
`reach run --temp 0 --ids` on SmolLM2 as the reference, and runs the tests with mono, which finds the
build's libreach.so (DllImport "libreach") through LD_LIBRARY_PATH.

Exits 77 (meson's SKIP) with a message when mcs / mono (Debian's mono-devel: tools/setup.sh --test) or
the SmolLM2 model (tools/get_smollm2.sh) are missing.

usage: run_csharp_tests.py SOURCE_ROOT REACH_EXE LIBREACH ABI_LAYOUT_EXE OUT_DIR
"""
import glob
import json
import os
import shutil
import subprocess
import sys

PROMPT = "The three primary colors are"
N = 32
SYSTEM = "You are Brom, the village blacksmith. Answer in one sentence."
USER = "What do you sell?"
N_CHAT = 24
SKIP = 77


def main():
    source_root, reach, libreach, abi_layout, out_dir = sys.argv[1:6]
    mcs, mono = shutil.which("mcs"), shutil.which("mono")
    if not mcs or not mono:
        print("SKIP: the C# suite needs Mono's mcs and mono (apt-get install mono-devel; tools/setup.sh --test)")
        return SKIP
    models = os.environ.get("REACH_MODELS") or os.path.join(os.path.expanduser("~"), ".cache", "reach", "models")
    model = os.path.join(models, "smollm2-135m-instruct")
    if not os.path.isfile(os.path.join(model, "config.json")):
        print(f"SKIP: no SmolLM2 at {model} (bash tools/get_smollm2.sh fetches it)")
        return SKIP

    os.makedirs(out_dir, exist_ok=True)
    exe = os.path.join(out_dir, "ReachTests.exe")
    sources = sorted(glob.glob(os.path.join(source_root, "bindings", "csharp", "*.cs")) +
                     glob.glob(os.path.join(source_root, "tests", "csharp", "*.cs")))
    # -warnaserror: the binding compiles clean.  System.Json parses the reference and the NPC reply.
    r = subprocess.run([mcs, "-warnaserror", "-nowarn:649", "-r:System.Json", "-r:System.Core", "-out:" + exe] + sources,
                       capture_output=True, text=True)
    print(r.stdout + r.stderr, end="")
    if r.returncode != 0:
        print("FAIL: mcs did not compile the binding and its tests")
        return 1

    layout = os.path.join(out_dir, "abi_layout.txt")
    with open(layout, "w") as f:
        subprocess.run([abi_layout], stdout=f, check=True)

    # The references: `reach run`'s greedy continuation of a prompt and greedy reply to a chat, their ids
    # from --ids (stderr) and their text (stdout, which ends with one newline).
    def reach_run(args, n):
        r = subprocess.run([reach, "run", "-m", model] + args + ["-n", str(n), "--temp", "0", "--ids"],
                           capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            raise RuntimeError(f"reach run exited {r.returncode}: {r.stderr[-2000:]}")
        lines = {k: v for k, _, v in (line.partition(": ") for line in r.stderr.splitlines())}
        return {
            "n": n,
            "text": r.stdout[:-1] if r.stdout.endswith("\n") else r.stdout,
            "ids": [int(x) for x in lines["generated ids"].split()],
            "prompt_ids": [int(x) for x in lines["prompt ids"].split()],
        }
    try:
        reference = reach_run(["-p", PROMPT], N)
        reference["prompt"] = PROMPT
        reference["chat"] = reach_run(["--system", SYSTEM, "--chat", USER], N_CHAT)
        reference["chat"].update({"system": SYSTEM, "user": USER})
    except RuntimeError as e:
        print(f"FAIL: {e}")
        return 1
    ref_file = os.path.join(out_dir, "reference.json")
    with open(ref_file, "w") as f:
        json.dump(reference, f)

    env = dict(os.environ)
    lib_dir = os.path.dirname(os.path.abspath(libreach))
    env["LD_LIBRARY_PATH"] = lib_dir + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    r = subprocess.run([mono, "--debug", exe, model, ref_file, layout], env=env, timeout=900)
    return r.returncode


if __name__ == "__main__":
    sys.exit(main())
