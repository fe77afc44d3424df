#!/bin/bash
# SASS instructions one warp runs per key tile of the attention kernels, counted in the
# code without a GPU: kernels/cuda/windowed.cu compiled for sm_90 (nvcc) in copies that
# fix the tile's path (unmasked or masked; the second companion list, dma's bias or the
# bucketed kernel's hax evictions, loaded or not) and pin the thread to one warp (so the
# compiler drops the branches of the other warps: which warp copies what), then
# disassembled (cuobjdump and the nvdisasm it runs, downloaded from PyPI's
# nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm into a temporary folder when they are
# not on PATH). A tile's instructions are those of the key loop: from the target of the
# backward branch that encloses the loop's HMMAs to that branch. With the path and the
# warp fixed the loop is nearly straight-line code, so the count is close to what the
# warp issues per tile (the last tile's trimmed 16-key groups and the loop's guards
# aside). A planning figure: issue is one limit among several, and the counts say
# nothing of latency. Only TILE is instantiated (a temporary instantiations.def).
#   scripts/sass-tile-counts.sh [TILE]       (TILE defaults to f16_d128_br128_bc32_w4_s2)
set -eu
tile=${1:-f16_d128_br128_bc32_w4_s2}
here=$(cd "$(dirname "$0")/.." && pwd)
row=$(python3 - "$tile" <<'EOF'
import re, sys
m = re.fullmatch(r"(f16|bf16)_d(\d+)_br(\d+)_bc(\d+)_w(\d+)_s(\d+)", sys.argv[1])
if not m:
    sys.exit(f"sass-tile-counts.sh: TILE '{sys.argv[1]}' is not DTYPE_dD_brBR_bcBC_wW_sS")
dtype, *n = m.groups()
print(f"ATTNTUNE_WINDOWED_TILE({'F16' if dtype == 'f16' else 'Bf16'}, {dtype}, {', '.join(n)})")
EOF
)
grep -qF "$row" "$here/kernels/cuda/instantiations.def" || {
  echo "sass-tile-counts.sh: $tile is not a row of kernels/cuda/instantiations.def" >&2
  exit 2
}
warps=$(sed 's/.*_w\([0-9]*\)_s.*/\1/' <<<"$tile")
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
# The copies include "kernels/cuda/instantiations.def" from beside themselves first.
mkdir -p "$tmp/kernels/cuda"
echo "$row" >"$tmp/kernels/cuda/instantiations.def"
mark='    // Every score of the tile: f(row tile, key tile, element, key column).'
tid='  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;'
for pattern in "$mark" "$tid" 'if (aux2 != nullptr) bias = ' \
  'const float bias = aux2 != nullptr ?' 'if (aux2 != nullptr) CpAsync4(&aux2_s'; do
  grep -qF "$pattern" "$src" || {
    echo "sass-tile-counts.sh: windowed.cu no longer has '$pattern'; update this script" >&2
    exit 2
  }
done
rest='warp = tid / 32, lane = tid % 32;'
jobs=0
for full in 1 0; do
  for second in true false; do
    for w in $(seq 0 $((warps - 1))); do
      name="w_${full}_${second}_$w"
      sed -e "s|^$mark|    full = $full;|" \
        -e "s|^$tid|  const int tid = $w * 32 + static_cast<int>(threadIdx.x % 32), $rest|" \
        -e "s|if (aux2 != nullptr) bias = |if ($second) bias = |" \
        -e "s|const float bias = aux2 != nullptr ?|const float bias = $second ?|" \
        -e "s|if (aux2 != nullptr) CpAsync4(&aux2_s|if ($second) CpAsync4(\&aux2_s|" \
        "$src" >"$tmp/$name.cu"
      nice nvcc -O3 -DNDEBUG -arch=sm_90 -std=c++17 -I"$here" -c "$tmp/$name.cu" \
        -o "$tmp/$name.o" &
      jobs=$((jobs + 1))
      if [ $jobs -ge 2 ]; then wait -n; jobs=$((jobs - 1)); fi
    done
  done
done
wait
python3 - "$cuobjdump" "$tmp" "$tile" "$warps" <<'EOF'
import re, subprocess, sys
cuobjdump, tmp, tile, warps = sys.argv[1:]

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
    return sum(1 for a, _ in code if begin <= a <= end)

rows = [("dense (windowed)", "windowed", "true"),
        ("ks (block-skipping, no bias)", "blocksparse", "false"),
        ("dma (block-skipping, bias)", "blocksparse", "true"),
        ("lsh (bucketed, no second list)", "bucketed", "false"),
        ("hax (bucketed, its evictions loaded)", "bucketed", "true")]
print(f"SASS instructions a warp runs per key tile, sm_90, {tile}: the busiest warp "
      f"(each warp's)")
print("kernel | unmasked tile | masked tile")
for name, family, second in rows:
    kernel = f"attntune_{family}_{tile}"
    cells = []
    for full in ("1", "0"):
        if family == "bucketed" and full == "1":  # the bucketed kernel masks every tile
            cells.append("-")
            continue
        n = [tile_instructions(f"{tmp}/w_{full}_{second}_{w}.o", kernel) for w in range(int(warps))]
        cells.append(f"{max(n)} ({', '.join(map(str, n))})")
    print(f"{name} | {cells[0]} | {cells[1]}")
EOF
