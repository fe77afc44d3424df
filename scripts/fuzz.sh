#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ with clang, AddressSanitizer and UBSan, and runs
# each from its seed corpus (fuzz/corpus/<target>) in a scratch copy.
#   scripts/fuzz.sh --short        every target for 12 s (the test command's run, about 75 s)
#   scripts/fuzz.sh --runs N       every target for N executions (docs/reliability.md)
#   scripts/fuzz.sh --runs N replay database   the named targets only
# A crash, a leak, undefined behaviour or an exception other than UserError fails the run
# (exit 1) and leaves the input under build-fuzz/findings/; each becomes a regression test.
set -euo pipefail
cd "$(dirname "$0")/.."

mode="${1:---short}"
limit=()
case "$mode" in
  --short) limit=(-max_total_time=12); shift $(( $# > 0 ? 1 : 0 )) ;;
  --runs) limit=(-runs="${2:?--runs needs a count}"); shift 2 ;;
  *) echo "usage: scripts/fuzz.sh --short | --runs N [target ...]" >&2; exit 2 ;;
esac
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(parsers safetensors hf_config replay database config_json)

if ! command -v clang++ >/dev/null; then
  echo "fuzz: clang++ not found (scripts/install-deps.sh --test installs it)" >&2
  exit 1
fi
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DATTNTUNE_FUZZ=ON -DATTNTUNE_SANITIZE=ON -DATTNTUNE_CUDA=OFF -DATTNTUNE_TESTS=OFF \
  -DATTNTUNE_NATIVE=OFF >/dev/null
cmake --build build-fuzz -j2 --target fuzz_all >/dev/null

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p build-fuzz/findings
failed=0
passed=0
printf '%-12s %12s %8s %6s %6s %7s %s\n' target executions exec/s cov ft corpus result
for target in "${targets[@]}"; do
  if [ ! -d "fuzz/corpus/$target" ]; then echo "fuzz: no target '$target'" >&2; exit 2; fi
  mkdir -p "$work/$target"
  cp fuzz/corpus/"$target"/* "$work/$target"/
  log="$work/$target.log"
  if (cd "$work" && "$OLDPWD/build-fuzz/fuzz/${target}_fuzz" "${limit[@]}" -print_final_stats=1 \
        -artifact_prefix="$OLDPWD/build-fuzz/findings/$target-" "$work/$target" >"$log" 2>&1); then
    result=ok
    passed=$((passed + 1))
  else
    result="FAILED (see build-fuzz/findings/)"
    failed=$((failed + 1))
    grep -E "ERROR|what\(\)|SUMMARY" "$log" | head -5 >&2 || true
  fi
  execs=$(grep -o 'number_of_executed_units: *[0-9]*' "$log" | awk '{print $2}')
  speed=$(grep -o 'average_exec_per_sec: *[0-9]*' "$log" | awk '{print $2}')
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | awk '{print $2}')
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | awk '{print $2}')
  corpus=$(grep -o 'corp: [0-9]*' "$log" | tail -1 | awk '{print $2}')
  printf '%-12s %12s %8s %6s %6s %7s %s\n' "$target" "${execs:-?}" "${speed:-?}" "${cov:-?}" \
    "${ft:-?}" "${corpus:-?}" "$result"
done
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
