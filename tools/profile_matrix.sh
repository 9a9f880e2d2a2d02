#!/usr/bin/env bash
# Runs test suites under each device profile of tests/data/device-profiles (REACH_DEVICE_PROFILE) on
# this machine's Vulkan device, and prints a table: what reach chose under the profile (from
# `reach info --json --device-profile`) and whether each suite passed.
#
#   tools/profile_matrix.sh                         # families, smollm2, model_gemma3 under all 13 (long)
#   tools/profile_matrix.sh families                # one suite under all 13
#   tools/profile_matrix.sh --dedupe families       # once per distinct effective record (the CI stage)
#   tools/profile_matrix.sh --mesa26 ...            # on Mesa 26's lavapipe (tools/coopmat_check.sh exec)
#
# --dedupe groups the profiles whose effective capabilities on this device are the same and runs each
# group once, naming the profiles that share the run.  The record compared is the kernel plan `reach info`
# prints plus the intersected capabilities (features reach uses, subgroups, sizes, shared memory,
# workgroup limits),
# with values capped where a larger one changes nothing reach does: descriptor counts at the most buffers
# one pipeline binds (the attention decode's, from `reach info`), the buffer and allocation sizes at 1 GiB
# (the suites' models are a few hundred MB at most, and a binding spans at most maxStorageBufferRange,
# compared exactly), the dispatch grid at 65535 and texel elements at what one binding holds; of the
# workgroup size only x (every kernel's workgroup is one-dimensional).  `reach info --device-profile` runs for every profile either way.
# Needs a built ./build (ninja -C build cli/reach and the suites' test_* programs).  Exit status: 0 when
# every run passed or was refused with a message naming the limit or feature the profile lacks (what
# reach must do on such a device; the table says "refused"), 1 when a run failed otherwise.
set -u
cd "$(dirname "$0")/.."
dedupe=0
driver=()   # the command that runs a program on the chosen driver (none: the machine's)
while [ $# -gt 0 ]; do
  case $1 in
    --dedupe) dedupe=1; shift ;;
    --mesa26) driver=(bash "$PWD/tools/coopmat_check.sh" exec); shift ;;
    *) break ;;
  esac
done
wrapper=() log_suffix=""
# meson names a wrapped run's log after the wrapper too (<logbase>-bash.txt).
[ ${#driver[@]} -gt 0 ] && wrapper=(--wrapper "${driver[*]}") && log_suffix=-bash
suites=("$@")
[ ${#suites[@]} -eq 0 ] && suites=(families smollm2 model_gemma3)
reach=./build/cli/reach
dir="$PWD/tests/data/device-profiles"
out=build/profile-matrix
mkdir -p "$out"
status=0

# refused LOG: whether every failure of a suite's log is reach refusing what the profile lacks (a pipeline
# binding more buffers than the device allows per stage, a profile below Vulkan 1.2), the failed `reach`
# runs among them saying so on their own output; any other failure (a wrong result, an unaligned
# binding) is not a refusal.
refused() {
  /usr/bin/python3 - "$1" <<'PY'
import re, sys
text = open(sys.argv[1], errors="replace").read()
refusal = re.compile(r"binds \d+ storage and \d+ texel buffers; this device allows|reach needs Vulkan 1\.2")
errors = [l for l in text.splitlines() if re.search(r"\bERROR\b", l)]
other = [l for l in errors if not refusal.search(l) and "REQUIRE( rc == 0 )" not in l]
sys.exit(0 if errors and not other and refusal.search(text) else 1)
PY
}

# Every profile: the plan (and the refusal, if any) with `reach info`.
for f in "$dir"/*.json; do
  b=$(basename "$f" .json)
  if ! "${driver[@]}" "$reach" info --json --device-profile "$f" >"$out/$b.json" 2>"$out/$b.info-err"; then
    echo "profile_matrix: reach info --device-profile $b failed: $(cat "$out/$b.info-err")" >&2
    status=1
  fi
done

# Groups: "KEY<TAB>profile profile ..." (one line per profile without --dedupe).
groups=$(/usr/bin/python3 - "$out" "$dedupe" "$dir"/*.json <<'EOF'
import json, os, re, sys
out, dedupe, files = sys.argv[1], sys.argv[2] == "1", sys.argv[3:]
# Not compared: shaderFloat16 and 8-bit storage, which reach uses for nothing but the cooperative-matrix
# decision (cooperative_matrix, compared), and the device name.
CAPS = ["storage_16bit", "integer_dot", "cooperative_matrix", "subgroup_size",
        "subgroup_min", "subgroup_max", "subgroup_arithmetic", "max_storage_buffer_range",
        "max_shared_memory", "max_workgroup_invocations", "api_version"]
CAPPED = ["max_stage_storage_buffers", "max_stage_sampled", "max_stage_resources"]
SIZES = ["max_memory_allocation_size", "max_buffer_size"]
groups = {}
for f in files:
    b = os.path.basename(f)[:-5]
    try:
        dev = json.load(open(os.path.join(out, b + ".json")))[0]
    except Exception:
        continue
    prof = dev["profile"]
    plan = {k: v for k, v in prof.items()
            if k not in ("name", "file", "descriptors", "workgroup_count", "texel_elements", "workgroup_size")}
    most_bound = int(re.search(r"binds (\d+) buffers", prof["descriptors"]).group(1))
    rec = {k: dev.get(k) for k in CAPS}
    rec.update({k: min(dev.get(k, 0), most_bound) for k in CAPPED})
    rec.update({k: min(dev.get(k, 0), 1 << 30) for k in SIZES})
    # reach dispatches at most 65535 workgroups a dimension (kernels/binding.cpp row_grid), and a texel
    # buffer spans at most one binding (maxStorageBufferRange) of 2-byte texels at the smallest.
    rec["workgroup_count"] = [min(int(x), 65535) for x in prof["workgroup_count"].split("x")]
    rec["texel_elements"] = min(int(prof["texel_elements"]), dev["max_storage_buffer_range"] // 2)
    # Every kernel's workgroup is one-dimensional (local_size_x only): y and z change nothing.
    rec["workgroup_size_x"] = prof["workgroup_size"].split("x")[0]
    # reach asks for features by Vulkan minor version: the patch number changes nothing it does.
    rec["api_version"] = ".".join(str(rec["api_version"]).split(".")[:2])
    key = json.dumps([plan, rec], sort_keys=True) if dedupe else b
    groups.setdefault(key, []).append(b)
for i, (key, members) in enumerate(groups.items()):
    print(f"{i}\t{' '.join(members)}")
EOF
)

printf '%s\n' "$groups" >"$out/groups.txt"
results="$out/results.txt"
: >"$results"
# One run: a suite under a group's first profile; appends its line to $results and prints it.
run_one() {
  local gid=$1 s=$2 members=$3 first=${3%% *} start secs rc verdict
  start=$(date +%s)
  REACH_DEVICE_PROFILE="$dir/$first.json" nice meson test -C build --no-rebuild --logbase "profile-$first-$s" "${wrapper[@]}" "$s" \
    >"$out/$first.$s.log" 2>&1
  rc=$?
  secs=$(( $(date +%s) - start ))
  if [ $rc -eq 0 ]; then verdict=pass
  elif refused "build/meson-logs/profile-$first-$s$log_suffix.txt"; then verdict="refused"
  else verdict=FAIL
  fi
  echo -e "$gid\t$s\t$verdict\t${secs}s\t$members" >>"$results"
  echo "profile_matrix: $s under $first ($members): $verdict in ${secs}s"
}
# PROFILE_JOBS runs at once (default 2: each run compiles pipelines on one thread at a time, so two share
# two cores; the 4 runs of the CI stage took 101 s one after another).
jobs_max=${PROFILE_JOBS:-2}
while IFS=$'\t' read -r gid members; do
  [ -z "$gid" ] && continue
  for s in "${suites[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n; done
    run_one "$gid" "$s" "$members" </dev/null &
  done
done <<<"$groups"
wait
grep -q $'\tFAIL\t' "$results" && status=1

# The table: per profile, what reach chose (first device) and each suite's result (its group's).
/usr/bin/python3 - "$out" "$results" "$dir"/*.json <<'EOF'
import json, os, sys
out, results, files = sys.argv[1], sys.argv[2], sys.argv[3:]
runs = {}
for line in open(results):
    gid, suite, verdict, secs, members = line.rstrip("\n").split("\t")
    for m in members.split():
        runs.setdefault(m, []).append(f"{suite} {verdict} ({secs}{', shared' if len(members.split()) > 1 else ''})")
print("| profile | matvec | GEMM (quantized) | decode | max binding | subgroup | suites |")
print("|---|---|---|---|---|---|---|")
for f in files:
    b = os.path.basename(f)[:-5]
    try:
        p = json.load(open(os.path.join(out, b + ".json")))[0]["profile"]
    except Exception:
        print(f"| {b} | reach info failed | | | | | |")
        continue
    short = lambda s: s.split(" (")[0].split(",")[0]
    print(f"| {b} | {short(p['matvec_mode'])} | {short(p['gemm_quantized'])} | {short(p['decode'])} | "
          f"{p['max_binding'].split(';')[0]} | {p['subgroup']} | {'; '.join(runs.get(b, ['not run']))} |")
EOF
exit $status
