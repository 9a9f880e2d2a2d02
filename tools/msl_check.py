#!/usr/bin/env python3
"""Checks that every SPIR-V kernel reach embeds translates to Metal Shading Language.

On macOS reach runs through MoltenVK, which translates each SPIR-V module to MSL with SPIRV-Cross
when a pipeline is made; a module SPIRV-Cross rejects would fail there at run time, on a machine
this project's tests do not run on.  So each module is translated here with the `spirv-cross`
command line (Debian's package spirv-cross) for MSL 2.4 (macOS 12) and MSL 3.0 (macOS 13).

Modules declaring a cooperative-matrix capability are skipped: MoltenVK does not offer
VK_KHR_cooperative_matrix, so reach never asks it to run them.  Empty modules (a kernel variant not
built, shaders/meson.build) are skipped too.

usage: msl_check.py [--spirv-cross PATH] (DIR | FILE.spv)...
Prints the count and each failure with spirv-cross's message; exit status 1 on any failure,
77 (skipped, for meson test) when spirv-cross is missing.
"""
import argparse
import concurrent.futures
import os
import shutil
import struct
import subprocess
import sys
import time

# --msl-version takes MMmmpp (major * 10000 + minor * 100 + patch).
MSL_VERSIONS = {"2.4": "20400", "3.0": "30000"}
OP_CAPABILITY = 17
# CooperativeMatrixKHR, CooperativeMatrixNV: SPIR-V spec, Capability.
COOPMAT_CAPABILITIES = {6022, 5357}
SPIRV_MAGIC = 0x07230203
# DotProductInputAll, DotProductInput4x8Bit, DotProductInput4x8BitPacked, DotProduct
# (SPV_KHR_integer_dot_product: the linear_q8 kernels' OpSDot).  Debian 12's SPIRV-Cross
# (2021.01.15) predates that extension and throws "Cannot resolve expression type" on OpSDot; a
# failure of such a module is reported as unchecked (the tool's fault, not the module's) unless
# --strict.  No newer SPIRV-Cross is packaged for Debian 12 or on PyPI.
INTEGER_DOT_CAPABILITIES = {6016, 6017, 6018, 6019}


def capabilities(words):
    """The OpCapability operands of a module (its instructions after the 5-word header)."""
    caps, i = set(), 5
    while i < len(words):
        count, opcode = words[i] >> 16, words[i] & 0xFFFF
        if count == 0:
            break
        if opcode == OP_CAPABILITY:
            caps.add(words[i + 1])
        i += count
    return caps


def classify(path):
    """'check', or why the module is skipped."""
    data = open(path, "rb").read()
    if not data:
        return "empty (variant not built)"
    if len(data) % 4 or len(data) < 20:
        return None  # not SPIR-V: translated anyway, so spirv-cross says what is wrong
    words = struct.unpack("<%dI" % (len(data) // 4), data)
    if words[0] != SPIRV_MAGIC:
        return None
    if capabilities(words) & COOPMAT_CAPABILITIES:
        return "cooperative matrix (not offered by MoltenVK)"
    return None


def uses_integer_dot(path):
    data = open(path, "rb").read()
    if len(data) % 4 or len(data) < 20:
        return False
    return bool(capabilities(struct.unpack("<%dI" % (len(data) // 4), data)) & INTEGER_DOT_CAPABILITIES)


def translate(spirv_cross, path, version):
    """None when PATH translates to MSL VERSION, else the failure's one-line description."""
    proc = subprocess.run([spirv_cross, "--msl", "--msl-version", version, path],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0 or "kernel void" not in proc.stdout:
        message = (proc.stderr.strip() or proc.stdout.strip()[-400:] or "no MSL kernel in the output")
        return f"{os.path.basename(path)} (MSL {version}): exit {proc.returncode}: {message}"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spirv-cross", default=shutil.which("spirv-cross"))
    ap.add_argument("--strict", action="store_true",
                    help="count failures of integer-dot-product modules too (a SPIRV-Cross newer than 2021)")
    ap.add_argument("paths", nargs="+", help="SPIR-V files, or folders whose *.spv are checked")
    args = ap.parse_args()
    if not args.spirv_cross or not os.access(args.spirv_cross, os.X_OK):
        print("SKIP: no spirv-cross on PATH (Debian: apt-get install spirv-cross, or tools/setup.sh --cross)")
        return 77

    files = []
    for p in args.paths:
        if os.path.isdir(p):
            files += sorted(os.path.join(p, f) for f in os.listdir(p)
                            if f.endswith(".spv") and f != "coopmat_probe.spv")
        else:
            files.append(p)
    if not files:
        print(f"msl_check: no .spv files in {' '.join(args.paths)}: build the shaders first "
              "(ninja -C build shaders/embedded_shaders.cpp)")
        return 1

    checked, skipped = [], []
    for f in files:
        why = classify(f)
        (skipped if why else checked).append((f, why))
    start = time.monotonic()
    jobs = [(f, v) for f, _ in checked for v in MSL_VERSIONS.values()]
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:  # each job is a process
        results = list(pool.map(lambda j: translate(args.spirv_cross, *j), jobs))
    elapsed = time.monotonic() - start
    failures, unchecked = [], []
    for (f, _), r in zip(jobs, results):
        if r:
            (unchecked if uses_integer_dot(f) and not args.strict else failures).append(r)

    version = subprocess.run([args.spirv_cross, "--revision"], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True).stdout.strip().splitlines()
    for f, why in skipped:
        print(f"skipped {os.path.basename(f)}: {why}")
    for u in unchecked:
        print(f"UNCHECKED {u} (SPV_KHR_integer_dot_product: this spirv-cross predates it; --strict fails)")
    for failure in failures:
        print(f"FAIL {failure}")
    print(f"msl_check: {len(checked)} modules x MSL {' and '.join(MSL_VERSIONS)}: "
          f"{len(jobs) - len(failures) - len(unchecked)} of {len(jobs)} translations passed, "
          f"{len(failures)} failed, {len(unchecked)} unchecked, {len(skipped)} modules skipped, "
          f"{elapsed:.1f} s ({args.spirv_cross}{', ' + version[0] if version else ''})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
