#!/bin/sh
# Fetches a real Kernel Tuner cache file that no search setting was chosen on
# (docs/search.md, "Spaces no setting was chosen on"): 2D convolution tuned on an NVIDIA
# GeForce RTX 2080 Ti, 6768 configurations, from the test data of the
# autotuning-methodology package on PyPI (MIT licence), in both of its formats.
#   scripts/fetch_heldout_replay.sh DIR
# writes DIR/convolution_RTX2080Ti.json (Kernel Tuner cache) and
# DIR/convolution_RTX2080Ti_T4.json (T4). Needs pip and PyPI; not used by the tests.
set -eu
[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
out=$1
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --no-deps --no-binary :all: -d "$tmp" \
  autotuning_methodology==1.1.0
tar -xzf "$tmp"/autotuning_methodology-1.1.0.tar.gz -C "$tmp"
mock="$tmp/autotuning_methodology-1.1.0/tests/autotuning_methodology/integration/mockfiles"
cp "$mock/mock_gpu.json" "$out/convolution_RTX2080Ti.json"
cp "$mock/mock_gpu_T4.json" "$out/convolution_RTX2080Ti_T4.json"
cd "$out"
sha256sum -c --quiet <<'SUMS'
fc2e58f8a9e65e4cb1799621c091dbcd89e4c827ed12d112edc5881d4a149939  convolution_RTX2080Ti.json
d36a29652afe8d968ac4dca830456cacf57ed308ff622ae4215f8f88cc73d96c  convolution_RTX2080Ti_T4.json
SUMS
cd - > /dev/null
echo "$out/convolution_RTX2080Ti.json $out/convolution_RTX2080Ti_T4.json"
