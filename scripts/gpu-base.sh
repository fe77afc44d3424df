#!/bin/bash
# Builds the base of an A/B comparison on a GPU: attntune at COMMIT, for sm_90 only,
# without the attention libraries or the tests (3 minutes on 2 cores), packed as a
# lean bundle (LEAN=1 scripts/gpu-bundle.sh) in BUNDLE_DIR, to be carried beside the full
# bundle and named by gpu-checks.sh's BASE:
#   scripts/gpu-base.sh COMMIT [BUNDLE_DIR]        (BUNDLE_DIR defaults to build-base-gpu)
# The checkout goes to a git worktree under /tmp, the build to build-base/ (both kept,
# so that a second call for the same commit only relinks).
set -eu
commit=${1:?commit}
bundle=${2:-build-base-gpu}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
git rev-parse --verify --quiet "$commit^{commit}" >/dev/null || {
  echo "gpu-base.sh: $commit: no such commit" >&2
  exit 2
}
tree=/tmp/attntune-base-$(git rev-parse --short "$commit")
[ -d "$tree" ] || git worktree add --detach "$tree" "$commit" >/dev/null
# build-base/ of another commit's checkout: start it afresh.
if [ -f build-base/CMakeCache.txt ] &&
  ! grep -qx "CMAKE_HOME_DIRECTORY:INTERNAL=$tree" build-base/CMakeCache.txt; then
  rm -rf build-base
fi
cmake -S "$tree" -B build-base -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DATTNTUNE_FLASHINFER=OFF -DATTNTUNE_CUDNN=OFF -DATTNTUNE_TESTS=OFF >/dev/null
nice cmake --build build-base -j2 --target attntune
LEAN=1 "$here/scripts/gpu-bundle.sh" build-base "$bundle"
