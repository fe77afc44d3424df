#!/bin/bash
# Everything docs/gpu.md reports from a GPU, in one run that fits a 10-minute command
# (DEADLINE seconds, default 570; steps that would not fit are skipped and say so):
#  1. device facts; the [gpu] tests (every CUDA kernel against the fp64 reference over
#     awkward shapes, the device selection against the host's, timers) and the CUPTI
#     tests on a real driver;
#  2. the issue-19 benches: B=1, Hq=16, Hkv=8, d=128, L=16384, fp16, end to end
#     (selection plus attention, both on the device, CUPTI kernel time) for every
#     compiled fp16 d=128 tile, as bench --json records, one per line, in
#     OUT/sparse-tiles.jsonl (the default tile's also in OUT/sparse.jsonl), and their
#     summary (per attended pair against dense, the selection's share; default tile and
#     fastest tile) in OUT/summary.txt;
#  3. dma_decode: one step at t = 4096 and t = 65536, and every step at once;
#  4. PyTorch's scaled_dot_product_attention on the same problem, where torch has CUDA;
#     the attention libraries' implementations (cuDNN's SDPA, `--impl cudnn`; FlashInfer,
#     `--impl flashinfer`) beside attntune's own dense kernel: dense and swa w=1024 at
#     L=16384, fp16 (and bf16 dense),
#     as bench --json records in OUT/libs.jsonl, with their ratios;
#  5. compute-sanitizer memcheck of the numerics of every family; racecheck and synccheck
#     of the selection's block-level kernels and of the attention kernels (every family,
#     every tile, once);
#  6. tune --phase decode and tune --metrics; counters of the sparse kernels (bench
#     --metrics at L=4096, a whole launch) and of the gathered attention kernels alone
#     (ncu at L=16384), and the selection's kernels under ncu (dma w=1024, ks k=64, lsh's
#     bins: occupancy, issue rate, warp stalls, memory throughput).
#   scripts/gpu-checks.sh BUNDLE_OR_BUILD_DIR OUT_DIR [RESULT_DIR]
# (scripts/gpu-bundle.sh packs a bundle.) SPARSE_TILES=default benches the default tile
# alone; LIBRARY_RUN=off leaves out library_cuda_run; MEMCHECK_TESTS narrows memcheck's
# gpu_windowed_test cases (a Catch2 filter). STEPS (default: all) names the steps to run,
# e.g. STEPS="sparse metrics ncu": tests sparse decode torch libs memcheck tune metrics ncu
# grid (the libraries' grid: GRID_* below; not in the default run, which it would overrun).
# BASE="BUNDLE_DIR ..." (other builds' bundles, e.g. scripts/gpu-base.sh of the commit
# before a change, and of one between, to tell two changes apart) benches the sparse
# step's default-tile configurations on those builds too, each right after this one's,
# in BASE's order, into sparse-ab.jsonl ("build": "new", or the base's label: its bundle's
# commit file, else base1, base2, ...) and an A/B table in summary.txt (scripts/ab_table.py).
# Every log goes to OUT_DIR; RESULT_DIR, when given, receives at most 7 files worth keeping
# (the device tool returns 8, the command's log among them), after every step and on exit:
# summary.txt, sparse.jsonl, sparse-ab.jsonl, all.tar.gz (every log and record, the
# tiles', decode's and torch's JSONL included), libs.jsonl, metrics.jsonl, then the grid's.
# libcudnn is loaded at run time (kernels/cuda/libraries/cudnn_loader.h): where it is not
# on the loader's path, ATTNTUNE_CUDNN_LIBRARY is set to the one python3's nvidia-cudnn
# package holds, and that package's neighbours (nvrtc, cuBLAS) join LD_LIBRARY_PATH.
set -u
build=$(cd "${1:?build or bundle dir}" && pwd)
if [ -f "$build/bundle.tar.xz" ] && [ ! -x "$build/attntune" ]; then  # gpu-bundle.sh's archive
  mkdir -p /tmp/attntune-bundle
  tar -C /tmp/attntune-bundle -xJf "$build/bundle.tar.xz" || exit 1
  build=/tmp/attntune-bundle
fi
build_commit=$(cat "$build/commit" 2>/dev/null || echo unknown)
# BASE: other builds' bundles (LEAN=bin gpu-bundle.sh is enough), whose attntune the
# sparse step benches beside this one's, configuration by configuration.
base_ats=()
base_labels=()
i=0
for b in ${BASE:-}; do
  i=$((i + 1))
  base=$(cd "$b" 2>/dev/null && pwd) || { echo "gpu-checks.sh: BASE: $b: no such directory" >&2; exit 2; }
  if [ -f "$base/bundle.tar.xz" ] && [ ! -x "$base/attntune" ]; then
    mkdir -p "/tmp/attntune-base$i"
    tar -C "/tmp/attntune-base$i" -xJf "$base/bundle.tar.xz" || exit 1
    base=/tmp/attntune-base$i
  fi
  label=$(cat "$base/commit" 2>/dev/null || echo "base$i")
  for seen in "${base_labels[@]}"; do [ "$seen" = "$label" ] && label="$label#$i"; done
  base_ats+=("$base/attntune")
  base_labels+=("$label")
done
out=${2:?output dir}
results=${3:-}
mkdir -p "$out"
out=$(cd "$out" && pwd)
here=$(cd "$(dirname "$0")/.." && pwd)
export LD_LIBRARY_PATH="$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if [ -z "${ATTNTUNE_CUDNN_LIBRARY:-}" ]; then
  cudnn_lib=$(python3 -c 'import nvidia.cudnn, os; print(os.path.join(list(nvidia.cudnn.__path__)[0], "lib", "libcudnn.so.9"))' 2>/dev/null)
  if [ -n "$cudnn_lib" ] && [ -f "$cudnn_lib" ]; then
    export ATTNTUNE_CUDNN_LIBRARY=$cudnn_lib
    for d in "$(dirname "$(dirname "$(dirname "$cudnn_lib")")")"/*/lib; do
      LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$d"
    done
  fi
fi
# A base packed without its libraries (LEAN=bin) takes this bundle's; one that finds
# not all of them is left out, with the line that says so.
for ((x = ${#base_ats[@]} - 1; x >= 0; --x)); do
  missing=$(LD_LIBRARY_PATH="$(dirname "${base_ats[$x]}")/lib:$LD_LIBRARY_PATH" ldd "${base_ats[$x]}" |
    awk '/not found/{print $1}' | tr '\n' ' ')
  if [ -n "$missing" ]; then
    echo "== BASE ${base_labels[$x]} left out: its attntune needs ${missing}that neither it nor this bundle holds" |
      tee -a "$out/summary.txt"
    unset 'base_ats[x]' 'base_labels[x]'
  fi
done
base_ats=("${base_ats[@]}")
base_labels=("${base_labels[@]}")
deadline=${DEADLINE:-570}
start=$(date +%s)
at="$build/attntune"
log() { echo "== [$(( $(date +%s) - start ))s] $*" | tee -a "$out/summary.txt"; }
left() { echo $((deadline - ($(date +%s) - start))); }
# cap SECONDS: SECONDS, or what is left of the deadline less 5 s if that is less; at
# least 1 (timeout 0 would be no limit). Every step runs under timeout -k 5 of its cap,
# so no step runs past the deadline (a fixed limit ran up to 60 s past it).
cap() { local l=$(( $(left) - 5 )); local c=$(( $1 < l ? $1 : l )); echo $(( c < 1 ? 1 : c )); }
# want STEP: whether STEPS names it (or is empty).
want() {
  if [ -z "${STEPS:-}" ]; then [ "$1" != grid ]; else [[ " $STEPS " == *" $1 "* ]]; fi
}
# fits SECONDS: whether a step that may take SECONDS still fits; logs a skip if not.
fits() {
  if [ "$(left)" -lt "$1" ]; then log "skipped (needs ${1}s, $(left)s left): $2"; return 1; fi
  return 0
}
# One JSON object per line from bench --json's indented output.
compact() { python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))))' "$1"; }
# The same, with "build": NAME added (the A/B records).
build_tag() {
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); r["build"]=sys.argv[2]; print(json.dumps(r))' "$1" "$2"
}

# deliver: every log in one archive, and RESULT_DIR's few files (the device tool returns 8
# files, the command's own log among them: at most 7 here; what is left out is in
# all.tar.gz and, for the decode and torch records, in summary.txt). Run after each step
# and on exit, so that a run stopped at its limit still returns what it measured.
deliver() {
  tar -C "$out" --exclude=all.tar.gz -czf "$out/all.tar.gz.part" . 2>/dev/null &&
    mv "$out/all.tar.gz.part" "$out/all.tar.gz"
  [ -n "$results" ] || return 0
  mkdir -p "$results"
  local f kept=0
  for f in summary.txt sparse.jsonl sparse-ab.jsonl all.tar.gz libs.jsonl metrics.jsonl \
      libraries.jsonl torch-grid.jsonl; do
    [ $kept -lt 7 ] || break
    if [ -s "$out/$f" ]; then cp "$out/$f" "$results/"; kept=$((kept + 1)); fi
  done
}
trap deliver EXIT
trap 'exit 143' TERM

log "date $(date -u +%FT%TZ) deadline ${deadline}s; bundle of commit $build_commit${BASE:+; bases ${base_labels[*]}}"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem \
  --format=csv 2>&1 | tee -a "$out/summary.txt"
"$at" devices >"$out/devices.txt" 2>&1
log "attntune devices rc=$?"
head -3 "$out/devices.txt" | tee -a "$out/summary.txt"
log "ATTNTUNE_CUDNN_LIBRARY=${ATTNTUNE_CUDNN_LIBRARY:-unset}"

# 1. Tests: the CPU ones in seconds, then every [gpu] case (none may be skipped).
# The cuDNN cases ([cudnn]: graph builds take seconds) run apart, in gpu_cudnn.log, and
# FlashInfer's ([flashinfer]) in gpu_flashinfer.log.
want tests && for entry in cuda_plan_test:60 cuda_select_test:60 library_plan_test:60 cudnn_test:60 \
    flashinfer_test:60 cupti_activity_test:60 cupti_metrics_test:60 gpu_windowed_test:120 \
    gpu_library_test:60 gpu_cudnn:90 gpu_flashinfer:90; do
  t=${entry%%:*}
  limit=${entry##*:}
  bin=$t
  filter=""
  if [ "$t" = gpu_windowed_test ]; then filter="~[cudnn]~[flashinfer]"; fi
  if [ "$t" = gpu_cudnn ]; then bin=gpu_windowed_test; filter="[cudnn]"; fi
  if [ "$t" = gpu_flashinfer ]; then bin=gpu_windowed_test; filter="[flashinfer]"; fi
  [ -x "$build/tests/gpu/$bin" ] || { log "$bin missing from $build"; continue; }
  fits "$limit" "$t" || continue
  (cd "$build/tests/gpu" && timeout -k 5 "$(cap "$limit")" ./$bin -d yes ${filter:+"$filter"} >"$out/$t.log" 2>&1)
  log "$t rc=$?"
  tail -n 3 "$out/$t.log" | tee -a "$out/summary.txt"
done
grep -h -E "^[0-9.]+ s: " "$out/gpu_windowed_test.log" "$out/gpu_cudnn.log" "$out/gpu_flashinfer.log" 2>/dev/null | sort -rn | head -5 >>"$out/summary.txt"

deliver
# 2. The sparse benches at L=16384: end to end, with the selection's own time, for every
# compiled fp16 d=128 tile (the tunable Tile, as a tune would search it). Each
# configuration runs first without a Tile, so bench takes the Tile parameter's default
# (cp::DefaultTile: the measured preferred tile, else the first) and names it in its
# record; sparse.jsonl holds those records, sparse-tiles.jsonl every tile's; the summary
# gives both, per attended pair against dense at the same choice (default against
# default, fastest against fastest). The bases run that same kernel.
shape=B=1,Hq=16,Hkv=8,L=16384,d=128
all_tiles=$(sed -n 's/^ATTNTUNE_WINDOWED_TILE(F16, f16, 128, \([0-9]*\), \([0-9]*\), \([0-9]*\), \([0-9]*\)).*/br\1_bc\2_w\3_s\4/p' \
  "$here/kernels/cuda/instantiations.def")
: >"$out/sparse.jsonl"
: >"$out/sparse-tiles.jsonl"
rm -f "$out/sparse-ab.jsonl"
want sparse && for v in "dense" "ks k=64" "dma w=1024" "dma w=64" "lsh k=64" "hax k_lsh=32,k_ks=32"; do
  set -- $v
  case $1 in dense) family=windowed ;; ks|dma) family=blocksparse ;; *) family=bucketed ;; esac
  default_tile=""
  tiles=default
  [ "${SPARSE_TILES:-all}" = default ] || tiles="default $all_tiles"
  for tile in $tiles; do
    [ "$tile" = "$default_tile" ] && continue  # benched first, as the default
    fits 30 "bench $v $tile" || continue
    params=${2:-}
    [ "$tile" = default ] || params="${2:+$2,}Tile=attntune_${family}_f16_d128_$tile"
    timeout -k 5 "$(cap 120)" "$at" bench --device cuda:0 --variant "$1" --impl cuda ${params:+--params "$params"} \
      --max-seconds 1 --shape $shape --unchecked --json >"$out/bench.json" 2>"$out/bench.err"
    rc=$?
    log "bench L=16384 $v $tile rc=$rc"
    if [ $rc -ne 0 ]; then tail -3 "$out/bench.err" | tee -a "$out/summary.txt"; continue; fi
    compact "$out/bench.json" >>"$out/sparse-tiles.jsonl"
    [ "$tile" = default ] || continue
    compact "$out/bench.json" >>"$out/sparse.jsonl"
    kernel=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["params"].get("Tile", ""))' \
      "$out/bench.json")
    default_tile=${kernel#attntune_"${family}"_f16_d128_}
    log "default tile of $v: $kernel"
    # The same configuration and kernel on each base build, right after (its own
    # libraries first).
    [ ${#base_ats[@]} -gt 0 ] && build_tag "$out/bench.json" new >>"$out/sparse-ab.jsonl"
    for ((x = 0; x < ${#base_ats[@]}; ++x)); do
      base_at=${base_ats[$x]}
      fits 30 "base bench ${base_labels[$x]} $v" || break
      LD_LIBRARY_PATH="$(dirname "$base_at")/lib:$LD_LIBRARY_PATH" timeout -k 5 "$(cap 120)" "$base_at" bench \
        --device cuda:0 --variant "$1" --impl cuda --params "${2:+$2,}Tile=$kernel" --max-seconds 1 \
        --shape $shape --unchecked --json >"$out/bench.json" 2>"$out/bench.err"
      rc=$?
      log "base ${base_labels[$x]} bench L=16384 $v $default_tile rc=$rc"
      if [ $rc -eq 0 ]; then build_tag "$out/bench.json" "${base_labels[$x]}" >>"$out/sparse-ab.jsonl"
      else tail -3 "$out/bench.err" | tee -a "$out/summary.txt"; fi
    done
  done
done
if [ -s "$out/sparse-ab.jsonl" ]; then
  python3 "$here/scripts/ab_table.py" "$out/sparse-ab.jsonl" "${base_labels[@]}" new |
    tee -a "$out/summary.txt"
fi
want sparse && python3 - "$out"/sparse{,-tiles}.jsonl "$here/scripts" <<'EOF' | tee -a "$out/summary.txt"
import json, sys
def budgets(r):
    return ",".join("%s=%s" % kv for kv in sorted(r["params"].items()) if kv[0] != "Tile")
# What the selection read q, k, v as: the element types of its typed kernels (the
# kernels' fp16/bf16 tensors in place, or fp32 copies) among those the checked run launched.
sys.path.insert(0, sys.argv[3])
from ab_table import kernel_phase
def reads(r):
    types = {kernel_phase(k.get("name", ""))[1] for k in r.get("kernels") or []} - {""}
    return "+".join(sorted(types)) or "-"
def table(title, recs):
    print(title)
    print("variant params | Tile | median_ms (end to end) | span_ms | select_ms | selection share | pairs | pair_ratio | per pair vs dense | selection reads")
    dense = next((r for r in recs if r["variant"] == "dense"), None)
    for r in recs:
        if r.get("status") != "ok":
            print(r["variant"], r.get("params"), r.get("status"), r.get("message"))
            continue
        per_pair = ""
        if dense and dense.get("status") == "ok":
            per_pair = "%.2f" % ((r["median_ms"] / r["pairs"]) / (dense["median_ms"] / dense["pairs"]))
        share = r["select_ms"] / r["median_ms"] if r["median_ms"] > 0 else 0
        # The kernels' span (first start to last end, launch gaps included) beside their sum.
        span = "%.4f" % r["span_ms"] if "span_ms" in r else "-"
        print("%s %s | %s | %.4f | %s | %.4f | %.2f | %d | %.4f | %s | %s" % (r["variant"],
              budgets(r), r["params"].get("Tile", ""), r["median_ms"], span, r["select_ms"],
              share, r["pairs"], r.get("pair_ratio", 0), per_pair, reads(r)))
load = lambda f: [json.loads(line) for line in open(f) if line.strip()]
table("default tile:", load(sys.argv[1]))
best = {}
for r in load(sys.argv[2]):
    if r.get("status") != "ok":
        continue
    k = (r["variant"], budgets(r))
    if k not in best or r["median_ms"] < best[k]["median_ms"]:
        best[k] = r
table("fastest tile of each (every compiled fp16 d=128 tile benched):", list(best.values()))
EOF

# The same configurations through the public API on caller buffers (what a program
# linking libattntune pays: selection, kernel, stream-ordered allocations;
# CUDA events), beside bench's end-to-end medians.
if want sparse && [ "${LIBRARY_RUN:-on}" = on ] && [ -x "$build/benchmarks/library_cuda_run" ] && fits 90 "library_cuda_run"; then
  timeout -k 5 "$(cap 150)" "$build/benchmarks/library_cuda_run" 16384 >"$out/library.jsonl" 2>"$out/library.err"
  log "library_cuda_run 16384 rc=$?"
  tail -3 "$out/library.err" | tee -a "$out/summary.txt"
  python3 - "$out/sparse.jsonl" "$out/library.jsonl" <<'EOF' | tee -a "$out/summary.txt"
import json, sys
def key(variant, params):
    if isinstance(params, dict):  # bench's record: the variant's budgets
        params = ",".join("%s=%s" % kv for kv in params.items() if kv[0] in ("k", "w", "k_lsh", "k_ks"))
    return variant, ",".join(sorted(x for x in params.split(",") if x))
bench = {}
for line in open(sys.argv[1]):
    r = json.loads(line) if line.strip() else {}
    if r.get("status") == "ok":
        bench[key(r["variant"], r.get("params") or {})] = r["median_ms"]
print("variant params | library call ms (events) | bench end to end ms (CUPTI) | library / bench")
for line in open(sys.argv[2]):
    if not line.strip():
        continue
    r = json.loads(line)
    b = bench.get(key(r["variant"], r["params"]))
    print("%s %s | %.4f | %s | %s" % (r["variant"], r["params"], r["median_ms"],
          "%.4f" % b if b else "-", "%.2f" % (r["median_ms"] / b) if b else "-"))
EOF
fi

deliver
# 3. dma_decode: one step at t = 4096 and at t = 65536 (a server's step with its cache:
# resident update, chosen keys, attention of that step), beside every step of the
# sequence at once (benchmarks/cuda_decode_step, CUDA events); then bench's whole-sequence
# record at t = 4096 (end to end, CUPTI).
if want decode && [ -x "$build/benchmarks/cuda_decode_step" ] && fits 120 "cuda_decode_step"; then
  timeout -k 5 "$(cap 180)" "$build/benchmarks/cuda_decode_step" 4096 65536 >"$out/decode.jsonl" 2>"$out/decode.err"
  log "cuda_decode_step 4096 65536 rc=$?"
  cat "$out/decode.jsonl" | tee -a "$out/summary.txt"
  tail -3 "$out/decode.err" | tee -a "$out/summary.txt"
  python3 -c 'import json,sys
r = {j["t"]: j for j in map(json.loads, open(sys.argv[1])) if "t" in j}
if 4096 in r and 65536 in r:
    print("one step at t=65536 / at t=4096: %.3f" % (r[65536]["one_step_us"] / r[4096]["one_step_us"]))' \
    "$out/decode.jsonl" | tee -a "$out/summary.txt"
elif want decode && [ ! -x "$build/benchmarks/cuda_decode_step" ]; then
  log "skipped: cuda_decode_step (not in the bundle)"
fi
if want decode && fits 90 "bench dma_decode t=4096"; then
  timeout -k 5 "$(cap 120)" "$at" bench --device cuda:0 --variant dma_decode --impl cuda_decode \
    --params w_kv=1024,w_q=32,r=64 --shape B=1,Hq=16,Hkv=8,L=4096,d=128 --unchecked --json \
    >"$out/decode.json" 2>"$out/decode-bench.err"
  rc=$?
  log "bench dma_decode L=4096 rc=$rc"
  if [ $rc -eq 0 ]; then compact "$out/decode.json" | tee -a "$out/decode-bench.jsonl" "$out/summary.txt"
  else tail -3 "$out/decode-bench.err" | tee -a "$out/summary.txt"; fi
fi

deliver
# 4. PyTorch's SDPA on the same problem.
if want torch && python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null && fits 90 "torch SDPA"; then
  timeout -k 5 "$(cap 120)" python3 "$here/benchmarks/torch_sdpa_reference.py" 16384 >"$out/torch.jsonl" 2>"$out/torch.err"
  log "torch_sdpa_reference rc=$?"
  cat "$out/torch.jsonl" | tee -a "$out/summary.txt"
elif want torch && ! python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  log "skipped: torch SDPA (no torch with CUDA in python3)"
fi

deliver
# 4b. The attention libraries beside attntune's own dense kernel (same run, same
# problem): cuDNN's SDPA (its graph is built on the first call, in bench's warm-up) and
# FlashInfer's kernels.
: >"$out/libs.jsonl"
want libs && for v in "dense cuda fp16" "dense cudnn fp16" "dense flashinfer fp16" \
    "swa cuda fp16 w=1024,sink=0" "swa cudnn fp16 w=1024,sink=0" \
    "swa flashinfer fp16 w=1024,sink=0" "dense cuda bf16" "dense cudnn bf16" \
    "dense flashinfer bf16"; do
  set -- $v
  fits 45 "bench $v" || continue
  timeout -k 5 "$(cap 90)" "$at" bench --device cuda:0 --variant "$1" --impl "$2" --dtype "$3" \
    ${4:+--params $4} --shape $shape --unchecked --json >"$out/bench.json" 2>"$out/bench.err"
  rc=$?
  log "bench L=16384 $v rc=$rc"
  if [ $rc -eq 0 ]; then compact "$out/bench.json" >>"$out/libs.jsonl"; else tail -3 "$out/bench.err" | tee -a "$out/summary.txt"; fi
done
want libs && python3 - "$out/libs.jsonl" <<'EOF' | tee -a "$out/summary.txt"
import json, sys
recs = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
own = {}
for r in recs:
    if r.get("status") == "ok" and r.get("implementation") == "cuda":
        own[(r["variant"], r.get("dtype"))] = r
print("variant dtype implementation params | median_ms | attntune cuda / this")
for r in recs:
    if r.get("status") != "ok":
        print(r["variant"], r.get("implementation"), r.get("status"), r.get("message"))
        continue
    base = own.get((r["variant"], r.get("dtype")))
    ratio = "%.2f" % (base["median_ms"] / r["median_ms"]) if base and r["median_ms"] > 0 else ""
    print("%s %s %s %s | %.4f | %s" % (r["variant"], r.get("dtype"), r.get("implementation"),
          json.dumps(r.get("params", {})), r["median_ms"], ratio))
EOF

deliver
# 5. memcheck over one tile of every family, the bucketed and decode kernels and the
# device selection (the full numerics run under memcheck takes too long).
# sanitize WHAT TOOL CAP LOG BIN FILTER: compute-sanitizer's TOOL over the BIN test cases
# FILTER, for at most CAP seconds (and the deadline), its log in OUT/LOG.
sanitize() {
  local what=$1 tool=$2 limit=$3 logf=$4 bin=$5 filter=$6
  (cd "$build/tests/gpu" && timeout -k 5 "$(cap "$limit")" compute-sanitizer --tool "$tool" \
    --error-exitcode 3 "./$bin" "$filter" >"$out/$logf" 2>&1)
  log "compute-sanitizer $what rc=$?"
  tail -n 4 "$out/$logf" | tee -a "$out/summary.txt"
}
if want memcheck && command -v compute-sanitizer >/dev/null && fits 120 "memcheck"; then
  sanitize memcheck memcheck 200 memcheck.log gpu_windowed_test \
    "${MEMCHECK_TESTS:-The variant table*,Gathered decode*,Split-KV*,Device*}"
  # The library on caller buffers: every family, the selection in a stream-ordered workspace.
  fits 40 "memcheck (library)" && sanitize "memcheck (library)" memcheck 90 memcheck-library.log \
    gpu_library_test "the library runs on caller device buffers*"
  # Shared-memory hazards and barrier misuse of the selection's block-level kernels: the
  # prefix top-k (the chunks' top lists, the block-wide scan of the sorted order), the key
  # lists (a block's segment counts), the ks scores (the chunk sums' prefix by a block),
  # the LSH bins (the staged projections).
  race_tests="Device prefix top-k*,Device ks and dma scores*,Device LSH bins*"
  fits 40 "racecheck (selection)" && sanitize "racecheck (selection)" \
    racecheck 60 racecheck.log gpu_windowed_test "$race_tests"
  fits 30 "synccheck (selection)" && sanitize "synccheck (selection)" \
    synccheck 45 synccheck.log gpu_windowed_test "$race_tests"
  # The attention kernels themselves, every family once at every tile: the key ring, the
  # companions' copies spread over the warps, the stages' reuse.
  attention_tests="Attention kernels of every family*"
  fits 40 "racecheck (attention)" && sanitize "racecheck (attention)" \
    racecheck 90 racecheck-attention.log gpu_windowed_test "$attention_tests"
  fits 30 "synccheck (attention)" && sanitize "synccheck (attention)" \
    synccheck 60 synccheck-attention.log gpu_windowed_test "$attention_tests"
elif want memcheck && ! command -v compute-sanitizer >/dev/null; then
  log "skipped: memcheck, racecheck, synccheck (no compute-sanitizer on PATH)"
fi

deliver
# 6. Tunes on the GPU: decode phase; counters of every ok trial; counters of the sparse
# kernels at L=4096 (what limits them: tensor-pipe activity, DRAM bytes).
if want tune && fits 120 "tune --phase decode"; then
  timeout -k 5 "$(cap 150)" "$at" tune --device cuda:0 --phase decode --variants dense,swa,dma_decode \
    --seq-lens 1024,4096 --budget 3 --out "$out/tune" >"$out/tune_decode.log" 2>&1
  log "attntune tune --phase decode rc=$?"
  tail -n 15 "$out/tune_decode.log" | tee -a "$out/summary.txt"
fi
if want tune && fits 120 "tune --metrics"; then
  timeout -k 5 "$(cap 150)" "$at" tune --device cuda:0 --variants dense,ks,lsh --seq-lens 1024 --budget 2 \
    --metrics --out "$out/tune-metrics" >"$out/tune-metrics.log" 2>&1
  log "attntune tune --metrics rc=$?"
  tail -n 8 "$out/tune-metrics.log" | tee -a "$out/summary.txt"
  python3 -c 'import sqlite3,sys; db=sqlite3.connect(sys.argv[1]); print(db.execute("select count(distinct trial_id), count(*) from metric where name like \"hw_%\"").fetchone(), "trials with counters, counter rows")' \
    "$out/tune-metrics/attntune.db" 2>&1 | tee -a "$out/summary.txt"
fi
want metrics && for v in "dense" "ks k=64" "dma w=1024" "lsh k=64" "hax k_lsh=32,k_ks=32"; do
  set -- $v
  fits 40 "bench --metrics $v" || continue
  timeout -k 5 "$(cap 60)" "$at" bench --device cuda:0 --variant "$1" ${2:+--params $2} --metrics --unchecked \
    --shape B=1,Hq=16,Hkv=8,L=4096,d=128 --json >"$out/metrics.json" 2>&1
  rc=$?
  log "bench --metrics L=4096 $v rc=$rc"
  if [ $rc -ne 0 ]; then tail -3 "$out/metrics.json" | tee -a "$out/summary.txt"; continue; fi
  compact "$out/metrics.json" >>"$out/metrics.jsonl"
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(json.dumps({"median_ms": j.get("median_ms"), "select_ms": j.get("select_ms"), "hardware": j.get("hardware")}))' \
    "$out/metrics.json" 2>&1 | tee -a "$out/summary.txt"
done
# The gathered attention kernels alone under ncu (bench --metrics counts a whole launch,
# selection included): L=16384, one launch each after the warm-up.
if want ncu && command -v ncu >/dev/null; then
  for v in "ks k=64" "dma w=1024" "lsh k=64"; do
    set -- $v
    fits 60 "ncu $v" || continue
    timeout -k 5 "$(cap 90)" ncu --kernel-name regex:'attntune_(blocksparse|bucketed)' --launch-skip 1 --launch-count 1 \
      --metrics gpu__time_duration.sum,dram__bytes.sum,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum \
      "$at" bench --device cuda:0 --variant "$1" --params "$2" --shape $shape --unchecked \
      --min-reps 1 --max-seconds 0.1 >"$out/ncu.txt" 2>&1
    log "ncu $v rc=$?"
    grep -E "attntune_|gpu__|dram__|sm__|l1tex__" "$out/ncu.txt" | head -8 | tee -a "$out/summary.txt"
  done
  # What limits the gathered kernel at the one target the bytes leave in reach (dma
  # w=1024), beside dense's kernel at the same tile: issue, warp stalls, instruction mix
  # and the top stall sites (SourceCounters), in attention-ncu.txt (all.tar.gz); the
  # instructions executed per tensor-pipe cycle set the two apart per tile.
  for v in "dma w=1024 blocksparse" "dense - windowed"; do
    set -- $v
    fits 60 "ncu attention $1" || continue
    echo "== $1 $2" >>"$out/attention-ncu.txt"
    params=$2
    [ "$params" = - ] && params=
    timeout -k 5 "$(cap 90)" ncu --kernel-name regex:"attntune_$3" --launch-skip 1 --launch-count 1 \
      --section SpeedOfLight --section Occupancy --section LaunchStats --section SchedulerStats \
      --section WarpStateStats --section InstructionStats --section ComputeWorkloadAnalysis \
      --section MemoryWorkloadAnalysis --section SourceCounters \
      --metrics smsp__inst_executed.sum,sm__pipe_tensor_cycles_active.sum \
      "$at" bench --device cuda:0 --variant "$1" ${params:+--params "$params"} --shape $shape \
      --unchecked --min-reps 1 --max-seconds 0.1 >>"$out/attention-ncu.txt" 2>&1
    log "ncu attention $1 rc=$?"
    grep -E "^\s+(attntune_|Duration|Compute \(SM\) Throughput|Achieved Occupancy|Issued Warp Per Scheduler|Warp Cycles Per Issued|smsp__inst_executed.sum|sm__pipe_tensor_cycles_active.sum)" \
      "$out/attention-ncu.txt" | tail -8 | tee -a "$out/summary.txt"
  done
  # The selection's kernels (the first launches of attntune_select_*: one selection, 12
  # kernels at dma w=1024 and 15 at ks k=64 (scores, the scan's 1 + 6 or 7 steps, fill,
  # chunks, tile_max, lists), and the next one's first; lsh's bins alone): duration,
  # occupancy, issue rate, warp stalls and memory throughput, in selection-ncu.txt
  # (all.tar.gz), one summary line per kernel.
  for v in "dma w=1024 select_ 13" "ks k=64 select_ 16" "lsh k=64 select_lsh_bins 1"; do
    set -- $v
    fits 60 "ncu selection $1 $2" || continue
    echo "== $1 $2" >>"$out/selection-ncu.txt"
    timeout -k 5 "$(cap 120)" ncu --kernel-name regex:"attntune_$3" --launch-count "$4" \
      --section SpeedOfLight --section Occupancy --section LaunchStats --section SchedulerStats \
      --section WarpStateStats --section MemoryWorkloadAnalysis "$at" bench --device cuda:0 \
      --variant "$1" --params "$2" --shape $shape \
      --unchecked --min-reps 1 --max-seconds 0.1 >>"$out/selection-ncu.txt" 2>&1
    log "ncu selection $1 $2 rc=$?"
  done
  [ -s "$out/selection-ncu.txt" ] && python3 - "$out/selection-ncu.txt" <<'EOF' | tee -a "$out/summary.txt"
import re, sys
keys = ("Duration", "Compute (SM) Throughput", "Memory Throughput", "Achieved Occupancy",
        "Eligible Warps Per Scheduler", "Warp Cycles Per Issued Instruction", "Registers Per Thread")
print("selection kernels under ncu: name | " + " | ".join(keys))
row = None
def flush():
    if row:
        print(" | ".join([row["name"]] + [row.get(k, "-") for k in keys]))
for line in open(sys.argv[1]):
    if line.startswith("== "):
        flush()
        row = None
        print(line.strip())
        continue
    m = re.match(r"\s+(attntune_select_\w+)", line)
    if m:
        flush()
        row = {"name": m.group(1)}
        continue
    m = re.match(r"\s+(.+?)\s{2,}\S*\s+([\d.,]+)\s*$", line)
    if m and row is not None and m.group(1) in keys:
        row[m.group(1)] = m.group(2)
flush()
EOF
elif want ncu; then
  log "skipped: ncu (not on PATH)"
fi
deliver
# 7. The libraries' grid (issue 20): per geometry, one tune of dense and swa (w = 1024,
# 4096) at GRID_LENS with every implementation searched (attntune's, cuDNN's, FlashInfer's
# where built), each entry re-timed against the default, and one decode tune of dense at
# GRID_DECODE; the first length searched exhaustively, the longer ones warm-started from it
# with GRID_BUDGET evaluations. Each implementation's best trial per entry as bench
# records (attntune db records) in OUT/libraries.jsonl, the entry's own marked "tuned";
# PyTorch's SDPA over the same grid in OUT/torch-grid.jsonl.
GRID_MODELS=${GRID_MODELS:-"qwen3-1.7b llama-3.1-8b $here/benchmarks/geometries/hq16-hkv8-d64.json $here/benchmarks/geometries/hq32-hkv8-d64.json"}
GRID_DTYPES=${GRID_DTYPES:-"fp16 bf16"}
GRID_LENS=${GRID_LENS:-"4096 16384"}
GRID_DECODE=${GRID_DECODE:-"4096,65536"}
GRID_BUDGET=${GRID_BUDGET:-6}
GRID_SWA=${GRID_SWA:-on}
# GRID_TORCH_ARGS: more arguments of torch_sdpa_grid.py (e.g. --heads 16:8 --dims 128).
: >"$out/libraries.jsonl"
grid_tune() {  # NAME NEEDS_SECONDS tune-args...
  local name=$1 needs=$2
  shift 2
  fits "$needs" "tune $name" || return 1
  timeout -k 5 "$(cap $(( $(left) - 5 )))" "$at" tune --device cuda:0 --max-seconds 0.15 "$@" \
    >>"$out/grid-$name.log" 2>&1
  local rc=$?
  log "tune $name $* rc=$rc"
  grep -E "re-timed|evaluations|error|failed" "$out/grid-$name.log" | tail -4 | tee -a "$out/summary.txt"
}
if want grid; then
  if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null && fits 60 "torch SDPA grid"; then
    timeout -k 5 "$(cap 150)" python3 "$here/benchmarks/torch_sdpa_grid.py" --dtypes "$(echo $GRID_DTYPES | tr ' ' ,)" \
      ${GRID_TORCH_ARGS:-} >"$out/torch-grid.jsonl" 2>"$out/torch-grid.err"
    log "torch_sdpa_grid rc=$?"
    tail -2 "$out/torch-grid.err" | tee -a "$out/summary.txt"
  fi
  mkdir -p "$out/grid"
  variants=dense
  params=()
  if [ "$GRID_SWA" = on ]; then variants=dense,swa; params=(--params w=1024,w=4096,sink=0); fi
  first_len=${GRID_LENS%% *}
  # Every geometry's first length and decode, then the longer lengths (the fp64 checks of
  # long prefill problems take the most time), each warm-started from the first.
  for pass in first rest; do
    for dt in $GRID_DTYPES; do
      for m in $GRID_MODELS; do
        name=$dt-$(basename "$m" .json)
        db="$out/grid/$name.db"
        if [ $pass = first ]; then
          grid_tune "$name" 45 --dtype "$dt" --model "$m" --variants $variants "${params[@]}" \
            --seq-lens "$first_len" --strategy exhaustive --budget 64 --db "$db" --out "$out/grid/$name"
          grid_tune "$name-decode" 30 --dtype "$dt" --model "$m" --variants dense --phase decode \
            --seq-lens "$GRID_DECODE" --strategy exhaustive --budget 64 --db "$db" --out "$out/grid/$name"
        else
          for L in ${GRID_LENS#"$first_len"}; do
            grid_tune "$name" 90 --dtype "$dt" --model "$m" --variants $variants "${params[@]}" \
              --seq-lens "$L" --budget "$GRID_BUDGET" --db "$db" --out "$out/grid/$name"
          done
        fi
      done
    done
  done
  for db in "$out"/grid/*.db; do
    [ -f "$db" ] && "$at" db records --db "$db" >>"$out/libraries.jsonl" 2>>"$out/grid-records.err"
  done
  python3 "$here/benchmarks/libraries_table.py" "$out/libraries.jsonl" "$out/torch-grid.jsonl" \
    2>&1 | tee -a "$out/summary.txt"
fi
log "done in $(( $(date +%s) - start ))s"
deliver
