#!/bin/bash
# Extrapolation table of the tiny models trained at N = 128 (tools/train_tiny.py), seed-001 style:
# per-token top-1 accuracy and loss on the last N bytes while the context grows N, 4N, 8N
# (EXTRAPOLATION.md §7.2 last-segment protocol, §7.4 repeated / non-repeated), for every model and
# position scheme, averaged over K held-out samples.
#
# usage: tools/extrapolation_table.sh [-m MODELS_DIR] [-r REACH] [-k SAMPLES] [-o OUT_DIR]
#                                     [-s SCHEMES] [VARIANT...]
#   MODELS_DIR  models (default: models) holding heldout.txt and <variant>/ folders
#   REACH       the reach binary (default: $REACH, else build/cli/reach)
#   SAMPLES     held-out samples per cell (default 4): sample k = BOS + 8N held-out bytes starting
#               at byte k * ((len - 8N) / K), ids = byte values (whitespace-separated)
#   OUT_DIR     where ids files, per-run JSON, table.md and the plots go (default MODELS_DIR/extrapolation)
#   SCHEMES     default: default,ntk,yarn,rerope,leaky_rerope,logn
#   VARIANT     default: rope keynorm cosa-logn hwfa (the folders that exist)
# Each (variant, sample) is one `reach eval --tokens IDS --ctx N,4N,8N --score-last N --schemes S -o json`
# run, once as is and once with --repeat (the sample becomes its first N tokens repeated); sample 0
# also writes OUT_DIR/<variant>[-repeat].svg (reach --plot: mean NLL vs context, one line per scheme).
# The markdown tables (mean over samples) go to stdout and OUT_DIR/table.md.
set -euo pipefail
cd "$(dirname "$0")/.."

MODELS=models
REACH_BIN=${REACH:-build/cli/reach}
K=4
OUT=
SCHEMES=default,ntk,yarn,rerope,leaky_rerope,logn
while getopts "m:r:k:o:s:h" opt; do
  case $opt in
    m) MODELS=$OPTARG ;;
    r) REACH_BIN=$OPTARG ;;
    k) K=$OPTARG ;;
    o) OUT=$OPTARG ;;
    s) SCHEMES=$OPTARG ;;
    *) sed -n '2,22p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
OUT=${OUT:-$MODELS/extrapolation}
VARIANTS=("$@")
if [ ${#VARIANTS[@]} -eq 0 ]; then
  for v in rope keynorm cosa-logn hwfa; do [ -d "$MODELS/$v" ] && VARIANTS+=("$v"); done
fi
[ ${#VARIANTS[@]} -gt 0 ] || { echo "no models under $MODELS (run tools/train_tiny.py)" >&2; exit 1; }
[ -f "$MODELS/heldout.txt" ] || { echo "$MODELS/heldout.txt missing (tools/train_tiny.py --write-heldout)" >&2; exit 1; }
help=$("$REACH_BIN" eval --help 2>&1 || true)   # no `| grep -q`: SIGPIPE + pipefail races
if [[ "$help" != *--score-last* ]]; then
  echo "$REACH_BIN has no 'eval --score-last' yet (set REACH= or -r to a newer build)" >&2
  exit 1
fi

N=$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['max_position_embeddings'])" \
    "$MODELS/${VARIANTS[0]}/config.json")
CTX="$N,$((4 * N)),$((8 * N))"
mkdir -p "$OUT"

# ids files: BOS + 8N bytes, K samples spread over the held-out text
/usr/bin/python3 - "$MODELS/heldout.txt" "$OUT" "$K" "$N" <<'EOF'
import sys
held = open(sys.argv[1], "rb").read()
out, K, N = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
T = 8 * N
stride = (len(held) - T) // K
for k in range(K):
    ids = [256] + list(held[k * stride:k * stride + T])
    with open("%s/ids_%d.txt" % (out, k), "w") as f:
        f.write(" ".join(map(str, ids)) + "\n")
EOF

for v in "${VARIANTS[@]}"; do
  for k in $(seq 0 $((K - 1))); do
    for mode in plain repeat; do
      j="$OUT/$v.$mode.$k.json"
      [ -s "$j" ] && continue     # resume: delete OUT_DIR to recompute
      extra=()
      [ "$mode" = repeat ] && extra+=(--repeat)
      if [ "$k" = 0 ]; then
        if [ "$mode" = repeat ]; then extra+=(--plot "$OUT/$v-repeat.svg"); else extra+=(--plot "$OUT/$v.svg"); fi
      fi
      echo "reach eval $v $mode sample $k" >&2
      "$REACH_BIN" eval -m "$MODELS/$v" --tokens "$OUT/ids_$k.txt" --ctx "$CTX" --score-last "$N" \
          --schemes "$SCHEMES" "${extra[@]}" -o json > "$j.tmp"
      mv "$j.tmp" "$j"
    done
  done
done

/usr/bin/python3 - "$OUT" "$K" "$N" "$SCHEMES" "${VARIANTS[@]}" <<'EOF' | tee "$OUT/table.md"
import json, sys
out, K, N, schemes, variants = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4].split(","), sys.argv[5:]
names = {"rope": "RoPE", "keynorm": "KNA", "cosa-logn": "CosA-logn", "hwfa": "HWFA"}
ctxs = [N, 4 * N, 8 * N]
cell = {}
for v in variants:
    for mode in ("plain", "repeat"):
        for k in range(K):
            for r in json.load(open("%s/%s.%s.%d.json" % (out, v, mode, k))):
                cell.setdefault((v, mode, r["scheme"], r["ctx"]), []).append(r)
def mean(rows, key):
    xs = [r[key] for r in rows]
    if any(x is None for x in xs):
        return float("nan")
    return sum(x * r["n_scored"] for x, r in zip(xs, rows)) / sum(r["n_scored"] for r in rows)
def table(key, fmt, title, mul=1.0):
    print("%s (last %d bytes of each of %d held-out samples, %d scored predictions per cell)\n"
          % (title, N, K, K * N))
    hdr = ["model-scheme"] + ["%d" % c for c in ctxs] + ["%d rep" % c for c in ctxs]
    print("| " + " | ".join(hdr) + " |")
    print("| --- |" + " ---: |" * (len(hdr) - 1))
    for v in variants:
        for s in schemes:
            vals = []
            for mode in ("plain", "repeat"):
                for c in ctxs:
                    rows = cell.get((v, mode, s, c))
                    vals.append(fmt % (mul * mean(rows, key)) if rows else "-")
            label = names.get(v, v) + ("" if s == "default" else "-" + s)
            print("| " + label + " | " + " | ".join(vals) + " |")
    print()
table("accuracy", "%.2f%%", "Per-token top-1 accuracy", 100.0)
table("nll", "%.3f", "Mean loss (NLL, nats/byte)")
EOF
