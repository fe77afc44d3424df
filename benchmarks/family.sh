#!/usr/bin/env bash
# Issue 3's measurement set in one sequential run, printing a table (B=1, Hq=16, Hkv=8,
# d=128, fp32, causal, one core, medians). Run it on an otherwise idle machine: it takes
# about 15-25 minutes (dense at L=16384 alone is ~35 s per call, 7 calls).
#   1. the single-thread sgemm ceiling (native OpenBLAS kernel: OPENBLAS_CORETYPE and
#      OPENBLAS_L2_SIZE unset for that command only, as benchmarks/perf.sh does);
#   2. dense at L=4096 against that ceiling (checked run);
#   3. at L=16384 (bench --unchecked): dense, swa and dma (w=1024: fraction of the
#      pair bound), lsh, ks (k=64) and hax (32+32): time per attended pair against dense;
#   4. dma_decode per-step time at t=4096 and t=65536 (benchmarks/decode_steps);
#   5. peak resident memory at L=65536 of every sparse variant, one kernel call each
#      (benchmarks/peak_memory: `bench --unchecked` would count hax's attended pairs
#      with the O(L^2) reference key sets first; hybrid with full=0, since a full head
#      at 65536 is minutes per call).
# Usage: benchmarks/family.sh [build-dir] [out-dir]
# (build the attntune, sgemm_ceiling, decode_steps and peak_memory targets first)
set -euo pipefail
build=${1:-build}
out=${2:-$(mktemp -d)}
mkdir -p "$out"
bin="$build/attntune"
load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "family.sh: $(date -u +%FT%TZ), load $(load), results in $out"

env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$build/benchmarks/sgemm_ceiling" 2048 7 \
  > "$out/sgemm.txt"
"$bin" bench --variant dense --shape B=1,Hq=16,Hkv=8,L=4096,d=128 --json > "$out/dense4096.json"

S16=B=1,Hq=16,Hkv=8,L=16384,d=128
# name|variant|params: the default tiles, and other tiles for lsh (Bc=64, its default
# before 2026-11-22's third session) and hax (Br=32, its default before the fourth;
# Chunk=1024) -- tile sizes are search dimensions.
fam=("dense|dense|" "swa|swa|w=1024" "dma|dma|w=1024" "lsh|lsh|k=64,bits=4"
     "lsh_bc64|lsh|k=64,bits=4,Bc=64" "ks|ks|k=64" "hax|hax|k_lsh=32,k_ks=32,bits=4"
     "hax_br32|hax|k_lsh=32,k_ks=32,bits=4,Br=32"
     "hax_c1024|hax|k_lsh=32,k_ks=32,bits=4,Chunk=1024")
for e in "${fam[@]}"; do
  name=${e%%|*}; rest=${e#*|}; v=${rest%%|*}; p=${rest#*|}
  echo "  L=16384 $v $p (load $(load))"
  "$bin" bench --variant "$v" ${p:+--params "$p"} --shape "$S16" --max-seconds 1 --unchecked \
    --json > "$out/f16k_$name.json"
done

echo "  dma_decode steps (load $(load))"
"$build/benchmarks/decode_steps" 65536 256 32 64 4096 65536 > "$out/decode.txt"

S64=B=1,Hq=16,Hkv=8,L=65536,d=128
mem=("swa|w=1024" "hybrid|w=1024,full=0" "lsh|k=64,bits=4" "ks|k=64"
     "hax|k_lsh=32,k_ks=32,bits=4" "dma|w=1024" "dma_decode|w_kv=256,w_q=32,r=64")
for e in "${mem[@]}"; do
  v=${e%%|*}; p=${e#*|}
  echo "  L=65536 memory $v (load $(load))"
  "$build/benchmarks/peak_memory" "$v" "$p" "$S64" > "$out/mem_$v.json"
done
echo "family.sh: done $(date -u +%FT%TZ), load $(load)"

python3 - "$out" <<'EOF'
import json, os, re, sys
out = sys.argv[1]
J = lambda f: json.load(open(os.path.join(out, f)))
sg = open(os.path.join(out, "sgemm.txt")).read()
sgemm = json.loads(sg.strip().splitlines()[-1])["gflops"]
d4 = J("dense4096.json")
print(f"\nsgemm ceiling: {sg.strip()}")
print(f"dense L=4096: {d4['median_ms']:.1f} ms, {d4['gflops']:.1f} GFLOP/s = "
      f"{d4['gflops'] / sgemm:.2f} of sgemm (target >= 0.50)\n")
dense = J("f16k_dense.json")
dpp = dense["median_ms"] / dense["pairs"]
print("| L=16384 | params | median ms | cv | select ms | pair ratio | per pair vs dense | "
      "fraction of pair bound | target |")
print("|---|---|---|---|---|---|---|---|---|")
for name in ["dense", "swa", "dma", "lsh", "lsh_bc64", "ks", "hax", "hax_br32", "hax_c1024"]:
    j = J(f"f16k_{name}.json")
    v = j["variant"]
    per = (j["median_ms"] / j["pairs"]) / dpp
    frac = 1 / per
    if v in ("swa", "dma"):
        tgt = f"fraction >= 0.85: {'met' if frac >= 0.85 else 'NOT met'}"
    elif v == "dense":
        tgt = ""
    else:
        tgt = f"per pair <= 2.5: {'met' if per <= 2.5 else 'NOT met'}"
    print(f"| {v} | {json.dumps(j['params'])} | {j['median_ms']:.1f} | {j['cv']:.2f} | "
          f"{j['select_ms']:.0f} | {j['pair_ratio']:.4f} | {per:.2f} | {frac:.2f} | {tgt} |")
dec = open(os.path.join(out, "decode.txt")).read()
steps = dict(re.findall(r"t=(\d+): median step ([0-9.]+) us", dec))
if "4096" in steps and "65536" in steps:
    r = float(steps["65536"]) / float(steps["4096"])
    print(f"\ndma_decode per step: t=4096 {steps['4096']} us, t=65536 {steps['65536']} us, "
          f"ratio {r:.2f} (target <= 1.25: {'met' if r <= 1.25 else 'NOT met'})")
print("\n| L=65536 memory | peak RSS bytes | in+out bytes | ratio | target <= 1.25 |")
print("|---|---|---|---|---|")
for v in ["swa", "hybrid", "lsh", "ks", "hax", "dma", "dma_decode"]:
    j = J(f"mem_{v}.json")
    r = j["peak_rss_bytes"] / j["io_bytes"]
    print(f"| {v} | {j['peak_rss_bytes']:.0f} | {j['io_bytes']:.0f} | {r:.3f} | "
          f"{'met' if r <= 1.25 else 'NOT met'} |")
EOF
