#!/bin/sh
# Quality of every sparse variant on every structured generator (issue 3): mass_recall
# and rel_err against dense (checked path, fp64 reference), each variant at the same
# budget of about 64 keys per query. Prints a markdown table.
#
#   benchmarks/quality.sh [build-dir] [shape] [seed]
#
# Default shape B=1,Hq=4,Hkv=2,L=2048,d=64 (the reference is quick there). A second
# table measures the needle on the rows that seek it: Lq = Lk / 10 (every row is in the
# last tenth), B=1, Hq=16, Hkv=8 (eight needle directions and LSH projections), d=64,
# with lsh and hax at bits=6 beside bits=4 (the needle sits ~Lk/7 positions back, past
# the 64 most recent keys of a 4-bit bin at Lk=2048).
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

needle_shape=B=1,Hq=16,Hkv=8,Lq=204,Lk=2048,d=64
needle_variants="swa|w=64
lsh|k=64,bits=4
lsh|k=64,bits=6
ks|k=64
hax|k_lsh=32,k_ks=32,bits=4
hax|k_lsh=32,k_ks=32,bits=6
dma|w=64"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/main" "$tmp/needle"
echo "$variants" | while IFS='|' read -r v p; do
  for inp in $patterns; do
    "$bin" bench --variant "$v" --params "$p" --shape "$shape" --inputs "$inp" --seed "$seed" \
      --max-seconds 0.05 --json > "$tmp/main/$v.$p.$inp.json" || true
  done
done
echo "$needle_variants" | while IFS='|' read -r v p; do
  "$bin" bench --variant "$v" --params "$p" --shape "$needle_shape" --inputs needle \
    --seed "$seed" --max-seconds 0.05 --json > "$tmp/needle/$v.$p.needle.json" || true
done

python3 - "$tmp/main" "$shape" "$seed" "$patterns" "$tmp/needle" "$needle_shape" <<'EOF'
import json, os, sys
tmp, shape, seed, patterns = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split()
needle_dir, needle_shape = sys.argv[5], sys.argv[6]
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
print(f"\nThe needle on the rows that seek it, {needle_shape}, seed {seed}: mass_recall / rel_err\n")
print("| variant | params | needle (seeking rows) |")
print("|---|---|---|")
for f in sorted(os.listdir(needle_dir), key=lambda f: (order.index(f.split('.')[0]), f)):
    v, rest = f.split('.', 1)
    p = rest[:-len('.needle.json')]
    try:
        j = json.load(open(os.path.join(needle_dir, f)))
    except ValueError:
        j = {}
    cell = (f"{j['mass_recall']:.3f} / {j['rel_err']:.3f}" if j.get("status") == "ok"
            else j.get("status", "missing"))
    print(f"| {v} | {p} | {cell} |")
EOF
