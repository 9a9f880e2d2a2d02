#!/usr/bin/python3
"""`reach info --device-profile FILE` for every profile of tests/data/device-profiles: it exits 0, names
the profile (the file's first under `profiles`, read here with Python's json), shows the plan with the
profile applied and the profile alone, and agrees with the file on the fused decode (the fused mat-vec
binds 14 buffers: a profile with fewer storage buffers per stage decodes unfused).  The --json form
carries the same plan; REACH_DEVICE_PROFILE does what the flag does; a malformed profile is one error
line naming the key.

usage: /usr/bin/python3 tests/python/test_cli_device_profile.py [REACH]   (default build/cli/reach; stdlib only)
"""
import glob
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FUSED_BINDINGS = 14   # shaders/spec/linear_matvec_fused_q.h


def run(reach, args, env=None):
    e = dict(os.environ)
    e.pop("REACH_DEVICE_PROFILE", None)
    e.update(env or {})
    return subprocess.run([reach, "info"] + args, capture_output=True, text=True, timeout=120, env=e)


def storage_buffers(doc, name):
    """maxPerStageDescriptorStorageBuffers the profile states (the largest over its capabilities), else 4."""
    best = 4
    for cap in doc["profiles"][name]["capabilities"]:
        cap = cap[0] if isinstance(cap, list) else cap
        for struct in doc["capabilities"][cap].get("properties", {}).values():
            best = max(best, struct.get("limits", {}).get("maxPerStageDescriptorStorageBuffers", 0))
    return best


def main():
    reach = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "cli", "reach")
    files = sorted(glob.glob(os.path.join(ROOT, "tests", "data", "device-profiles", "*.json")))
    assert len(files) == 13, files
    failures = []
    for path in files:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        name = next(iter(doc["profiles"]))
        r = run(reach, ["--device-profile", path])
        out = r.stdout
        checks = [
            (r.returncode == 0, f"exit {r.returncode}: {r.stderr.strip()}"),
            (f"device profile {name} " in out, "names the profile"),
            ("profile alone:" in out and "with the profile:" in out, "both views"),
            ("real subgroup width" in out, "says what a profile cannot change"),
        ]
        fused = storage_buffers(doc, name) >= FUSED_BINDINGS
        decode_lines = [l for l in out.splitlines() if l.strip().startswith("decode ")]
        checks.append((len(decode_lines) >= 2, "a decode line per view"))
        checks.append((all(l.split(None, 1)[1].startswith("fused") == fused for l in decode_lines[:1]),
                       f"profile alone decodes {'fused' if fused else 'unfused'}: {decode_lines[:1]}"))
        rj = run(reach, ["--json", "--device-profile", path])
        try:
            devices = json.loads(rj.stdout)
            checks.append((all(d["profile"]["name"] == name and "decode" in d["profile"] for d in devices),
                           "--json carries the plan"))
        except (ValueError, KeyError) as e:
            checks.append((False, f"--json: {e}"))
        for ok, what in checks:
            if not ok:
                failures.append(f"{os.path.basename(path)}: {what}")
        print(f"{'ok  ' if all(c[0] for c in checks) else 'FAIL'} {os.path.basename(path)}")

    # The variable does what the flag does.
    android = os.path.join(ROOT, "tests", "data", "device-profiles", "VP_ANDROID_15_minimums.json")
    r = run(reach, [], {"REACH_DEVICE_PROFILE": android})
    if r.returncode != 0 or "device profile VP_ANDROID_15_minimums" not in r.stdout:
        failures.append("REACH_DEVICE_PROFILE is not applied by reach info")

    with tempfile.TemporaryDirectory() as tmp:
        bad = os.path.join(tmp, "bad.json")
        with open(bad, "w", encoding="utf-8") as f:
            json.dump({"profiles": {"P": {"capabilities": ["c"]}},
                       "capabilities": {"c": {"properties": {"VkPhysicalDeviceProperties": {
                           "limits": {"maxPerStageDescriptorStorageBuffers": "many"}}}}}}, f)
        for args, env in (([ "--device-profile", bad], None), ([], {"REACH_DEVICE_PROFILE": bad})):
            r = run(reach, args, env)
            errors = [l for l in r.stderr.splitlines() if "error:" in l]
            if r.returncode == 0 or len(errors) != 1 or "limits.maxPerStageDescriptorStorageBuffers" not in errors[0]:
                failures.append(f"malformed profile {args or env}: exit {r.returncode}, stderr {r.stderr!r}")
        r = run(reach, ["--device-profile", os.path.join(tmp, "missing.json")])
        if r.returncode == 0 or "missing.json" not in r.stderr:
            failures.append(f"missing profile: exit {r.returncode}, stderr {r.stderr!r}")

    for f in failures:
        print("FAIL", f)
    print(f"{len(files)} profiles, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
