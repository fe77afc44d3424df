#!/bin/sh
# Quality of every sparse variant on every structured generator (issue 3): mass_recall
# and rel_err against dense (checked path, fp64 reference), each variant at the same
# budget of about 64 keys per query. Prints a markdown table.
#
#   benchmarks/quality.sh [build-dir] [shape] [seed]
#
# Default shape B=1,Hq=4,Hkv=2,L=2048,d=64 (the reference is quick there).
set -eu
build=${1:-build}
shape=${2:-B=1,Hq=4,Hkv=2,L=2048,d=64}
seed=${3:-1}
bin="$build/attntune"
[ -x "$bin" ] || { echo "quality.sh: $bin not found (build the attntune target)" >&2; exit 2; }

# variant|params: 64 keys per query each (swa: window; lsh, ks: k; hax 32 + 32;
# dma: w; dma_decode: 48 resident + 16 query-chosen).
variants="swa|w=64
swa|w=60,sink=4
lsh|k=64,bits=4
ks|k=64
hax|k_lsh=32,k_ks=32,bits=4
dma|w=64
dma_decode|w_kv=48,w_q=16,r=64"
patterns="gaussian band sinks clusters needle"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "$variants" | while IFS='|' read -r v p; do
  for inp in $patterns; do
    "$bin" bench --variant "$v" --params "$p" --shape "$shape" --inputs "$inp" --seed "$seed" \
      --max-seconds 0.05 --json > "$tmp/$v.$p.$inp.json" || true
  done
done

python3 - "$tmp" "$shape" "$seed" "$patterns" <<'EOF'
import json, os, sys
tmp, shape, seed, patterns = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split()
rows = {}
for f in sorted(os.listdir(tmp)):
    v, rest = f.split('.', 1)
    p, inp = rest[:-len('.json')].rsplit('.', 1)
    try:
        j = json.load(open(os.path.join(tmp, f)))
    except ValueError:
        j = {}
    rows.setdefault((v, p), {})[inp] = j
print(f"Quality at {shape}, seed {seed}: mass_recall / rel_err against dense\n")
print("| variant | params | " + " | ".join(patterns) + " |")
print("|---|---|" + "---|" * len(patterns))
order = ["swa", "lsh", "ks", "hax", "dma", "dma_decode"]
for (v, p) in sorted(rows, key=lambda k: (order.index(k[0]) if k[0] in order else 99, k[1])):
    cells = []
    for inp in patterns:
        j = rows[(v, p)].get(inp, {})
        if j.get("status") == "ok" and "mass_recall" in j:
            cells.append(f"{j['mass_recall']:.3f} / {j['rel_err']:.3f}")
        else:
            cells.append(j.get("status", "missing"))
    print(f"| {v} | {p} | " + " | ".join(cells) + " |")
EOF
