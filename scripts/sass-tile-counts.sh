#!/bin/bash
# Static SASS instructions of one key tile of the attention kernels, per warp, without a
# GPU: kernels/cuda/windowed.cu compiled for sm_90 (nvcc) in four copies that fix the
# tile's path (unmasked or masked; the block-skipping kernel's bias on or off), then
# disassembled (cuobjdump and the nvdisasm it runs, downloaded from PyPI's
# nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm into a temporary folder when they are not
# on PATH). A tile's instructions are those of the key loop: from the
# target of the backward branch that encloses the loop's HMMAs to that branch. With the
# path fixed the loop is nearly straight-line code, so the count is close to what a warp
# issues per tile (the last tile's trimmed 16-key groups and the pipeline's guards aside).
# A planning figure: issue is one of several limits, and the counts say nothing of
# latency.
#   scripts/sass-tile-counts.sh [TILE]       (TILE defaults to f16_d128_br128_bc32_w4_s2)
set -eu
tile=${1:-f16_d128_br128_bc32_w4_s2}
here=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d /tmp/attntune-sass.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cuobjdump=$(command -v cuobjdump || true)
if [ -z "$cuobjdump" ] || ! command -v nvdisasm >/dev/null; then
  python3 -m pip download --quiet --no-deps -d "$tmp/pip" nvidia-cuda-cuobjdump \
    nvidia-cuda-nvdisasm >/dev/null
  for wheel in "$tmp"/pip/*.whl; do python3 -m zipfile -e "$wheel" "$tmp/pip/x"; done
  cuobjdump=$(find "$tmp/pip/x" -type f -name cuobjdump | head -1)
  chmod +x "$cuobjdump" "$(dirname "$cuobjdump")/nvdisasm"
  export PATH="$(dirname "$cuobjdump"):$PATH"
fi
src="$here/kernels/cuda/windowed.cu"
# The copies: `full` fixed right before the scores are scaled; the load and the use of the
# second companion list (dma's bias; the bucketed kernel's hax evictions, whose use in the
# predicate stays a run-time branch) fixed.
mark='    // Every score of the tile: f(row tile, key tile, element, key column).'
for pattern in "$mark" 'if (aux2 != nullptr) bias = ' 'const float bias = aux2 != nullptr ?' \
  'if (aux2 != nullptr) CpAsync4(&aux2_s'; do
  grep -qF "$pattern" "$src" || {
    echo "sass-tile-counts.sh: windowed.cu no longer has '$pattern'; update this script" >&2
    exit 2
  }
done
for full in 1 0; do
  for bias in true false; do
    sed -e "s|^$mark|    full = $full;|" \
      -e "s|if (aux2 != nullptr) bias = |if ($bias) bias = |" \
      -e "s|const float bias = aux2 != nullptr ?|const float bias = $bias ?|" \
      -e "s|if (aux2 != nullptr) CpAsync4(&aux2_s|if ($bias) CpAsync4(\&aux2_s|" \
      "$src" >"$tmp/w_${full}_$bias.cu"
    nice nvcc -O3 -DNDEBUG -arch=sm_90 -std=c++17 -I"$here" -c "$tmp/w_${full}_$bias.cu" \
      -o "$tmp/w_${full}_$bias.o" &
  done
done
wait
python3 - "$cuobjdump" "$tmp" "$tile" <<'EOF'
import re, subprocess, sys
cuobjdump, tmp, tile = sys.argv[1:]

def tile_instructions(obj, kernel):
    sass = subprocess.run([cuobjdump, "-sass", "-fun", kernel, obj], capture_output=True,
                          text=True, check=True).stdout
    code = [(int(m.group(1), 16), m.group(2)) for m in
            (re.match(r"\s+/\*([0-9a-f]+)\*/\s+(.*?);", line) for line in sass.splitlines()) if m]
    mma = [a for a, text in code if "HMMA" in text]
    loops = []
    for a, text in code:
        m = re.search(r"BRA.*0x([0-9a-f]+)", text)
        if m and int(m.group(1), 16) <= min(mma) and a >= max(mma):
            loops.append((int(m.group(1), 16), a))
    begin, end = min(loops, key=lambda x: x[1] - x[0])
    body = [text for a, text in code if begin <= a <= end]
    return len(body), sum("HMMA" in text for text in body)

rows = [("dense (windowed)", "windowed", "true"),
        ("ks (block-skipping, no bias)", "blocksparse", "false"),
        ("dma (block-skipping, bias)", "blocksparse", "true"),
        ("lsh (bucketed, no second list)", "bucketed", "false"),
        ("hax (bucketed, its evictions loaded)", "bucketed", "true")]
print(f"SASS instructions of one key tile per warp, sm_90, {tile}")
print("kernel | unmasked tile | masked tile | HMMA")
for name, family, bias in rows:
    kernel = f"attntune_{family}_{tile}"
    n1, mma = tile_instructions(f"{tmp}/w_1_{bias}.o", kernel)
    n0, _ = tile_instructions(f"{tmp}/w_0_{bias}.o", kernel)
    print(f"{name} | {n1 if family != 'bucketed' else '-'} | {n0} | {mma}")
EOF
