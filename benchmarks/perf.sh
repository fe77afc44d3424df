#!/usr/bin/env bash
# The measurements of docs/performance.md in one run: the single-thread sgemm ceiling (native
# OpenBLAS kernel: OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset for that command only)
# and `attntune bench` of dense and swa at B=1, Hq=16, Hkv=8, d=128.
# Usage: benchmarks/perf.sh [build-dir] [L ...]
set -euo pipefail
build=${1:-build}
shift || true
lens=("$@")
[ ${#lens[@]} -eq 0 ] && lens=(1024 2048 4096)
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$build/benchmarks/sgemm_ceiling" 2048 7
for L in "${lens[@]}"; do
  shape="B=1,Hq=16,Hkv=8,L=$L,d=128"
  "$build/attntune" bench --variant dense --shape "$shape" --json | python3 -c '
import json,sys; j=json.load(sys.stdin)
print(json.dumps({k: j[k] for k in ["variant","params","shape","median_ms","cv","gflops","pairs","rel_err","mass_recall"] if k in j}))'
  for w in 256 1024; do
    "$build/attntune" bench --variant swa --params "w=$w" --shape "$shape" --json | python3 -c '
import json,sys; j=json.load(sys.stdin)
print(json.dumps({k: j[k] for k in ["variant","params","shape","median_ms","cv","gflops","pairs","pair_ratio","rel_err","mass_recall"] if k in j}))'
  done
done
