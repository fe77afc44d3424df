#!/bin/bash
# Builds the base of an A/B comparison on a GPU: attntune at COMMIT, for sm_90 only,
# without the attention libraries or the tests (3 minutes on 2 cores), packed as a
# lean bundle (LEAN=bin scripts/gpu-bundle.sh: the binary alone, the full bundle's
# libraries serving it on the GPU machine) in BUNDLE_DIR, to be carried beside the full
# bundle and named by gpu-checks.sh's BASE:
#   scripts/gpu-base.sh COMMIT [BUNDLE_DIR]        (BUNDLE_DIR defaults to build-base-gpu)
# The checkout goes to a git worktree under /tmp, the build to build-base-SHORT/ (both
# kept, so that a second call for the same commit only relinks, and the bases of several
# commits can be built one after the other for one call of gpu-checks.sh:
# BASE="build-base-gpu build-base2-gpu").
set -eu
commit=${1:?commit}
bundle=${2:-build-base-gpu}
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
git rev-parse --verify --quiet "$commit^{commit}" >/dev/null || {
  echo "gpu-base.sh: $commit: no such commit" >&2
  exit 2
}
short=$(git rev-parse --short "$commit")
tree=/tmp/attntune-base-$short
[ -d "$tree" ] || git worktree add --detach "$tree" "$commit" >/dev/null
dir=build-base-$short
cmake -S "$tree" -B "$dir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DATTNTUNE_FLASHINFER=OFF -DATTNTUNE_CUDNN=OFF -DATTNTUNE_TESTS=OFF >/dev/null
nice cmake --build "$dir" -j2 --target attntune
LEAN=bin "$here/scripts/gpu-bundle.sh" "$dir" "$bundle"
