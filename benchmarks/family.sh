#!/usr/bin/env bash
# The CPU kernels' measurement set in one sequential run, printing a table (B=1, Hq=16,
# Hkv=8, d=128, fp32, causal, one core, medians). Run it on an otherwise idle machine: it
# takes about 30-45 minutes (each hax bench also counts its attended pairs from the
# reference key sets first, ~40 s).
#   1. the single-thread sgemm ceiling (native OpenBLAS kernel: OPENBLAS_CORETYPE and
#      OPENBLAS_L2_SIZE unset for that command only, as benchmarks/perf.sh does);
#   2. dense at L=4096 against that ceiling (checked run);
#   3. at L=16384 (bench --unchecked), in ROUNDS rounds (default 3), each round dense
#      first, then swa and dma (w=1024: fraction of the pair bound), lsh (k=64), ks (k=64)
#      and hax (32+32) (time per attended pair against dense), lsh and hax at 4 and 8 hash
#      bits under both rules (sign: 16 and 256 bins; argmax: 4 and 8), and other tiles:
#      every ratio is taken against the dense of its own round, and the table gives each
#      round's ratio and their median. This VM's speed drifts by 10-30% within minutes (dense
#      alone: p10-p90 18.7-22.0 s per call in one run), so a single dense measured minutes
#      before a sparse variant moved the ratios by as much as the steps being judged;
#   4. dma_decode per-step time at t=4096 and t=65536 (benchmarks/decode_steps);
#   5. peak resident memory at L=65536 of every sparse variant, one kernel call each
#      (benchmarks/peak_memory: `bench --unchecked` would count hax's attended pairs
#      with the O(L^2) reference key sets first; hybrid with full=0, since a full head
#      at 65536 is minutes per call).
# Usage: benchmarks/family.sh [build-dir] [out-dir] [rounds]
# (build the attntune, sgemm_ceiling, decode_steps and peak_memory targets first)
set -euo pipefail
build=${1:-build}
out=${2:-$(mktemp -d)}
rounds=${3:-3}
if ! [[ "$rounds" =~ ^[1-9][0-9]*$ ]]; then
  echo "family.sh: error: rounds must be a positive integer, got '$rounds'" >&2
  exit 2
fi
mkdir -p "$out"
bin="$build/attntune"
load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "family.sh: $(date -u +%FT%TZ), load $(load), results in $out"

env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$build/benchmarks/sgemm_ceiling" 2048 7 \
  > "$out/sgemm.txt"
"$bin" bench --variant dense --shape B=1,Hq=16,Hkv=8,L=4096,d=128 --json > "$out/dense4096.json"

S16=B=1,Hq=16,Hkv=8,L=16384,d=128
# name|variant|params: the default tiles at 4 and 8 hash bits, sign and argmax rules, and
# other tiles for lsh (Bc=64) and hax (Br=32; Chunk=512 at 8 bits, where the default
# chooses 2048), the alternatives docs/performance.md compares -- tile sizes are search
# dimensions.
fam=("dense|dense|" "swa|swa|w=1024" "dma|dma|w=1024" "lsh|lsh|k=64,bits=4"
     "lsh_am4|lsh|k=64,bits=4,rule=argmax" "lsh_b8|lsh|k=64,bits=8"
     "lsh_am8|lsh|k=64,bits=8,rule=argmax" "lsh_bc64|lsh|k=64,bits=4,Bc=64" "ks|ks|k=64"
     "hax|hax|k_lsh=32,k_ks=32,bits=4" "hax_am4|hax|k_lsh=32,k_ks=32,bits=4,rule=argmax"
     "hax_b8|hax|k_lsh=32,k_ks=32,bits=8" "hax_am8|hax|k_lsh=32,k_ks=32,bits=8,rule=argmax"
     "hax_br32|hax|k_lsh=32,k_ks=32,bits=4,Br=32"
     "hax_b8c512|hax|k_lsh=32,k_ks=32,bits=8,Chunk=512")
for r in $(seq 1 "$rounds"); do
  for e in "${fam[@]}"; do
    name=${e%%|*}; rest=${e#*|}; v=${rest%%|*}; p=${rest#*|}
    # dense: one warm-up and at least 3 timed calls (~21 s each; a 4th when the median
    # is not yet tight); the others: at least 5 timed calls, then until 1 s past them
    # (--max-seconds 1) or a tight median
    reps=(); [ "$v" = dense ] && reps=(--min-reps 3)
    echo "  round $r: L=16384 $v $p (load $(load))"
    "$bin" bench --variant "$v" ${p:+--params "$p"} --shape "$S16" --max-seconds 1 \
      "${reps[@]}" --unchecked --json > "$out/f16k_${name}_r$r.json"
  done
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

python3 - "$out" "$rounds" <<'EOF'
import json, os, re, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
J = lambda f: json.load(open(os.path.join(out, f)))
sg = open(os.path.join(out, "sgemm.txt")).read()
sgemm = json.loads(sg.strip().splitlines()[-1])["gflops"]
d4 = J("dense4096.json")
print(f"\nsgemm ceiling: {sg.strip()}")
print(f"dense L=4096: {d4['median_ms']:.1f} ms, {d4['gflops']:.1f} GFLOP/s = "
      f"{d4['gflops'] / sgemm:.2f} of sgemm (target >= 0.50)\n")
R = range(1, rounds + 1)
dpp = {r: J(f"f16k_dense_r{r}.json")["median_ms"] / J(f"f16k_dense_r{r}.json")["pairs"]
       for r in R}
print("dense L=16384 per round: " + ", ".join(
    f"{J(f'f16k_dense_r{r}.json')['median_ms']:.0f} ms (cv {J(f'f16k_dense_r{r}.json')['cv']:.2f})"
    for r in R) + "\n")
print("| L=16384 | params | median ms per round | select ms | pair ratio | "
      "per pair vs the round's dense | median over rounds | fraction of pair bound | target |")
print("|---|---|---|---|---|---|---|---|---|")
for name in ["swa", "dma", "lsh", "lsh_am4", "lsh_b8", "lsh_am8", "lsh_bc64", "ks", "hax",
             "hax_am4", "hax_b8", "hax_am8", "hax_br32", "hax_b8c512"]:
    js = {r: J(f"f16k_{name}_r{r}.json") for r in R}
    j = js[1]
    v = j["variant"]
    per = {r: (js[r]["median_ms"] / js[r]["pairs"]) / dpp[r] for r in R}
    med = statistics.median(per.values())
    frac = 1 / med
    if v in ("swa", "dma"):
        tgt = f"fraction >= 0.85: {'met' if frac >= 0.85 else 'NOT met'}"
    else:
        tgt = f"per pair <= 2.5: {'met' if med <= 2.5 else 'NOT met'}"
    ms = " / ".join(f"{js[r]['median_ms']:.1f}" for r in R)
    pr = " / ".join(f"{per[r]:.2f}" for r in R)
    sel = statistics.median(js[r]["select_ms"] for r in R)
    print(f"| {v} | {json.dumps(j['params'])} | {ms} | {sel:.0f} | {j['pair_ratio']:.4f} | "
          f"{pr} | {med:.2f} | {frac:.2f} | {tgt} |")
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
