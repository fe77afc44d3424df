#!/bin/bash
# The checks that need a GPU, in one run: device facts, the [gpu] tests (numerics of every
# CUDA kernel against the fp64 reference, run-time resource confirmation, timer sanity),
# the CUPTI and metric tests on a real driver, compute-sanitizer memcheck of the numerics,
# and the timing benchmark beside PyTorch's scaled_dot_product_attention.
#   scripts/gpu-checks.sh BUILD_DIR OUT_DIR
set -u
build=${1:?build dir}
out=${2:?output dir}
mkdir -p "$out"
log() { echo "== $*" | tee -a "$out/summary.txt"; }
log "date $(date -u +%FT%TZ)"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem \
  --format=csv 2>&1 | tee -a "$out/summary.txt"
for t in cuda_plan_test cuda_resources_test cupti_activity_test cupti_metrics_test gpu_windowed_test; do
  if [ -x "$build/tests/gpu/$t" ]; then
    (cd "$build/tests/gpu" && timeout 300 ./$t >"$out/$t.log" 2>&1)
    rc=$?
    log "$t rc=$rc"
    tail -n 4 "$out/$t.log" | tee -a "$out/summary.txt"
  fi
done
if command -v compute-sanitizer >/dev/null && [ -x "$build/tests/gpu/gpu_windowed_test" ]; then
  (cd "$build/tests/gpu" && timeout 400 compute-sanitizer --tool memcheck --error-exitcode 3 \
    ./gpu_windowed_test "CUDA windowed kernels match*,CUDA bucketed kernels*,The variant table*,Gathered decode*,Split-KV*" >"$out/memcheck.log" 2>&1)
  log "compute-sanitizer memcheck rc=$?"
  tail -n 5 "$out/memcheck.log" | tee -a "$out/summary.txt"
fi
if [ -z "${QUICK:-}" ] && [ -x "$build/benchmarks/cuda_windowed_bench" ]; then
  timeout 300 "$build/benchmarks/cuda_windowed_bench" 4096 16384 >"$out/bench.jsonl" 2>&1
  log "cuda_windowed_bench rc=$?"
  cat "$out/bench.jsonl" | tee -a "$out/summary.txt"
fi
if [ -z "${SKIP_TORCH:-}" ] && python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  timeout 300 python3 "$(dirname "$0")/../benchmarks/torch_sdpa_reference.py" 4096 16384 \
    >"$out/torch.jsonl" 2>&1
  log "torch_sdpa_reference rc=$?"
  cat "$out/torch.jsonl" | tee -a "$out/summary.txt"
fi
# The CLI on the GPU: devices, checked benches (CPU fp64 reference), long unchecked
# benches with and without an L2 flush, a tune of the windowed variants and its re-run.
if [ -x "$build/attntune" ]; then
  at="$build/attntune"
  "$at" devices >"$out/devices.txt" 2>&1
  log "attntune devices rc=$?"
  cat "$out/devices.txt" | tee -a "$out/summary.txt"
  s=B=1,Hq=16,Hkv=8,L=2048,d=128
  for v in "dense" "swa w=1024" "hybrid w=256,full=2" "dense dtype=bf16" "ks k=64" "dma w=1024" \
      "lsh k=64" "hax k_lsh=32,k_ks=32"; do
    set -- $v
    extra=()
    case "${2:-}" in dtype=*) extra=(--dtype "${2#dtype=}");; ?*) extra=(--params "$2");; esac
    timeout 120 "$at" bench --device cuda:0 --variant "$1" "${extra[@]}" --shape $s --json \
      >"$out/bench.json" 2>&1
    log "bench checked $v rc=$?"
    name=$(echo "bench_$1_${2:-none}" | tr -c 'a-zA-Z0-9_\n' '_')
    mv "$out/bench.json" "$out/$name.json"
    grep -E '"(status|message|check_err|median_ms|gflops|select_ms|timer|sm_clock_mhz|dtype|params)"' \
      "$out/$name.json" | tr -d '\n' | tee -a "$out/summary.txt"; echo | tee -a "$out/summary.txt"
  done
  s=B=1,Hq=16,Hkv=8,L=16384,d=128
  for flush in "" "--flush-l2"; do
    [ -n "${QUICK:-}" ] && break
    for v in "dense" "swa w=1024" "ks k=64" "dma w=1024" "dma w=64"; do
      set -- $v
      timeout 120 "$at" bench --device cuda:0 --variant "$1" ${2:+--params $2} $flush --shape $s \
        --unchecked --json >"$out/bench16k.json" 2>&1
      name=$(echo "bench16k_$1_${2:-none}${flush#--}" | tr -c 'a-zA-Z0-9_\n' '_')
      mv "$out/bench16k.json" "$out/$name.json"
      log "bench unchecked L=16384 $v $flush rc=$?"
      grep -E '"(status|message|median_ms|p10_ms|p90_ms|gflops|pairs|select_ms|timer|sm_clock_mhz|mem_clock_mhz|gpu_temp_c|l2_flushed|params)"' \
        "$out/$name.json" | tr -d '\n' | tee -a "$out/summary.txt"; echo | tee -a "$out/summary.txt"
    done
  done
  for pass in 1 2; do
    [ -n "${QUICK:-}" ] && break
    start=$(date +%s)
    timeout 300 "$at" tune --device cuda:0 --variants dense,swa,hybrid,ks,dma --seq-lens 1024,2048 \
      --budget 4 --out "$out/tune" >"$out/tune$pass.log" 2>&1
    log "attntune tune --device cuda:0 pass $pass rc=$? in $(( $(date +%s) - start )) s"
    tail -n 30 "$out/tune$pass.log" | tee -a "$out/summary.txt"
  done
  # Decode steps (Lq = 1; dma_decode every step) on the cuda_decode kernels, same database.
  if [ -z "${QUICK:-}" ]; then
    start=$(date +%s)
    timeout 300 "$at" tune --device cuda:0 --phase decode --variants dense,swa,dma_decode \
      --seq-lens 1024,4096 --budget 4 --out "$out/tune" >"$out/tune_decode.log" 2>&1
    log "attntune tune --device cuda:0 --phase decode rc=$? in $(( $(date +%s) - start )) s"
    tail -n 30 "$out/tune_decode.log" | tee -a "$out/summary.txt"
  fi
fi
# (QUICK=1 skips the long-L benches, the tune and ncu.)
# Hardware counters of one launch (ncu), as a cross-check of the metric names attntune
# validated offline: the roofline point of the dense kernel at L=4096.
if [ -z "${QUICK:-}" ] && command -v ncu >/dev/null && [ -x "$build/benchmarks/cuda_windowed_bench" ]; then
  timeout 200 ncu --launch-count 1 --metrics gpu__time_duration.sum,dram__bytes.sum,\
sm__ops_path_tensor_op_hmma_src_fp16_dst_fp32.sum,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed,\
sm__throughput.avg.pct_of_peak_sustained_elapsed "$build/benchmarks/cuda_windowed_bench" 4096 \
    >"$out/ncu.txt" 2>&1
  log "ncu rc=$?"
  grep -E "attntune_windowed|gpu__|dram__|sm__" "$out/ncu.txt" | head -20 | tee -a "$out/summary.txt"
fi
# Everything in one archive (the device tool returns few files).
tar -C "$out" -czf "$out.tar.gz" . && mv "$out.tar.gz" "$out/all.tar.gz"
# Hardware counters through attntune's own range-profiler collection (bench --metrics).
if [ -x "$build/attntune" ]; then
  for v in "dense" "swa w=1024" "ks k=64"; do
    set -- $v
    timeout 120 "$at" bench --device cuda:0 --variant "$1" ${2:+--params $2} --metrics --unchecked \
      --shape B=1,Hq=16,Hkv=8,L=4096,d=128 --json >"$out/metrics.json" 2>&1
    log "bench --metrics $v rc=$?"
    python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(json.dumps({"median_ms": j.get("median_ms"), "gflops": j.get("gflops"), "hardware": j.get("hardware")}))' \
      "$out/metrics.json" 2>&1 | tee -a "$out/summary.txt" || tail -3 "$out/metrics.json" | tee -a "$out/summary.txt"
  done
  # The same counters stored with every ok trial of a tune (tune --metrics: counter passes
  # after all the timing), then read back from its database.
  timeout 300 "$at" tune --device cuda:0 --variants dense,swa,lsh --seq-lens 1024 --budget 3 \
    --metrics --out "$out/tune-metrics" >"$out/tune-metrics.log" 2>&1
  log "attntune tune --metrics rc=$?"
  tail -n 12 "$out/tune-metrics.log" | tee -a "$out/summary.txt"
  python3 -c 'import sqlite3,sys; db=sqlite3.connect(sys.argv[1]); print(db.execute("select count(distinct trial_id), count(*) from metric where name like \"hw_%\"").fetchone(), "trials with counters, counter rows"); print(db.execute("select c.variant, m.name, m.value from metric m join trial t on t.id=m.trial_id join config c on c.id=t.config_id where m.name in (\"hw_tensor_tflops\",\"hw_dram_gb_per_s\") order by 1,2 limit 12").fetchall())' \
    "$out/tune-metrics/attntune.db" 2>&1 | tee -a "$out/summary.txt"
fi
# Decode: one query row per head against a long cache, split-KV (cuda_decode) beside the
# windowed kernel (cuda), checked against the CPU reference.
if [ -x "$build/attntune" ]; then
  for lk in 4096 65536; do
    for v in "dense" "swa w=1024"; do
      set -- $v
      for impl in "cuda" "cuda_decode Split=16" "cuda_decode Split=64" "cuda_decode Split=256"; do
        set -- $v
        variant=$1; vparams=${2:-}
        set -- $impl
        params=$(echo "$vparams,${2:-}" | sed 's/^,//; s/,$//')
        timeout 120 "$at" bench --device cuda:0 --variant "$variant" --impl "$1" \
          ${params:+--params $params} --shape B=1,Hq=16,Hkv=8,Lq=1,Lk=$lk,d=128 --json \
          >"$out/decode.json" 2>&1
        log "decode Lk=$lk $variant $impl rc=$?"
        grep -E '"(status|message|check_err|median_ms|p10_ms|p90_ms|timer)"' "$out/decode.json" \
          | tr -d '\n' | tee -a "$out/summary.txt"; echo | tee -a "$out/summary.txt"
      done
    done
  done
  # dma_decode: every step of a sequence on the gathered decode kernel, checked.
  timeout 300 "$at" bench --device cuda:0 --variant dma_decode --impl cuda_decode \
    --params w_kv=256,w_q=16,r=32 --shape B=1,Hq=16,Hkv=8,L=2048,d=128 --json \
    >"$out/decode_dma.json" 2>&1
  log "dma_decode L=2048 cuda_decode rc=$?"
  grep -E '"(status|message|check_err|median_ms|p10_ms|p90_ms|select_ms|timer)"' \
    "$out/decode_dma.json" | tr -d '\n' | tee -a "$out/summary.txt"; echo | tee -a "$out/summary.txt"
  tar -C "$out" -czf "$out.tar.gz" . && mv "$out.tar.gz" "$out/all.tar.gz"
fi
