#!/bin/bash
# Packs what scripts/gpu-checks.sh runs into one archive that travels to a GPU machine:
# the attntune binary, the GPU and CUDA tests, the GPU benchmarks, and the shared
# libraries they need that a CUDA image lacks (Kokkos, SQLite, CUPTI), stripped, as
# BUNDLE_DIR/bundle.tar.xz (an sm_90 build with cuDNN's and FlashInfer's implementations is
# 138 MB unpacked, 37 MB packed; a four-arch build 284 MB and 57 MB; the device tool
# carries at most 64 MB, the checkout included).
#   scripts/gpu-bundle.sh BUILD_DIR [BUNDLE_DIR]      (BUNDLE_DIR defaults to build-gpu)
# then, on the GPU machine: scripts/gpu-checks.sh BUNDLE_DIR OUT_DIR
# LEAN=1 packs the attntune binary and its libraries alone (6.4 MB packed for gpu-base.sh's
# sm_90 build): the base of an A/B comparison, carried beside a full bundle (gpu-checks.sh's
# BASE). LEAN=bin packs the binary alone (2.2-2.3 MB for gpu-base.sh's builds, 4.5 MB for
# one with cuDNN's and FlashInfer's implementations): its libraries are then the full
# bundle's, which gpu-checks.sh puts on the loader's path (and checks the base finds).
# The bundle's `commit` file names the commit its build's source tree is at ("+changes"
# where that tree differs from it), which gpu-checks.sh logs and labels the A/B with.
set -eu
shopt -s nullglob
build=${1:?build dir}
bundle=${2:-build-gpu}
rm -rf "$bundle"
mkdir -p "$bundle/tests/gpu" "$bundle/benchmarks" "$bundle/lib"
cp "$build/attntune" "$bundle/"
[ "${LEAN:-0}" != 0 ] || for t in gpu_windowed_test gpu_library_test cupti_activity_test cupti_metrics_test cuda_plan_test \
    cuda_select_test library_plan_test cudnn_test flashinfer_test; do
  if [ -x "$build/tests/gpu/$t" ]; then cp "$build/tests/gpu/$t" "$bundle/tests/gpu/"; fi
done
[ "${LEAN:-0}" != 0 ] || for b in cuda_windowed_bench cuda_decode_step library_cuda_run; do
  if [ -x "$build/benchmarks/$b" ]; then cp "$build/benchmarks/$b" "$bundle/benchmarks/"; fi
done
# Libraries beyond glibc, libstdc++ and libgcc (which every image has, newer).
[ "${LEAN:-0}" = bin ] || for bin in "$bundle/attntune" "$bundle"/tests/gpu/* "$bundle"/benchmarks/*; do
  ldd "$bin" | awk '/=> \//{print $3}'
done | sort -u | grep -v -E '/(libc|libm|libpthread|libdl|librt|libutil|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' |
  while read -r lib; do cp -L "$lib" "$bundle/lib/"; done
strip -s "$bundle/attntune" "$bundle"/tests/gpu/* "$bundle"/benchmarks/* 2>/dev/null || true
src=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt")
commit=$(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ -n "$(git -C "$src" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  commit="$commit+changes"
fi
echo "$commit" >"$bundle/commit"
du -sh "$bundle"
tar -C "$bundle" -cJf "$bundle.tar.xz" .
rm -rf "$bundle"
mkdir -p "$bundle"
mv "$bundle.tar.xz" "$bundle/bundle.tar.xz"
du -sh "$bundle/bundle.tar.xz"
