#!/usr/bin/env python3
"""Times PyTorch's scaled_dot_product_attention on the same problems as
cuda_windowed_bench (B=1, Hq=16, Hkv=8, d=128, causal, fp16/bf16), as the reference point
the CUDA windowed kernels are compared against on a GPU machine. Not a test; needs torch
with CUDA. Prints one JSON object per line."""
import json
import sys

import torch
import torch.nn.functional as F

from torch_sdpa_grid import median_ms  # CUDA events, median of 20 after 3 warm-ups


def pairs_per_head(L, w):
    return sum(min(i + 1, w) if w else i + 1 for i in range(L))


def main():
    lengths = [int(a) for a in sys.argv[1:]] or [4096, 16384]
    dev = torch.device("cuda")
    print(json.dumps({"device": torch.cuda.get_device_name(0), "torch": torch.__version__}))
    for L in lengths:
        for dtype in (torch.float16, torch.bfloat16):
            g = torch.Generator(device=dev).manual_seed(7)
            q = torch.randn(1, 16, L, 128, device=dev, dtype=dtype, generator=g)
            k = torch.randn(1, 8, L, 128, device=dev, dtype=dtype, generator=g)
            v = torch.randn(1, 8, L, 128, device=dev, dtype=dtype, generator=g)
            for backend in ("flash", "cudnn", "efficient"):
                kinds = {"flash": torch.nn.attention.SDPBackend.FLASH_ATTENTION,
                         "cudnn": torch.nn.attention.SDPBackend.CUDNN_ATTENTION,
                         "efficient": torch.nn.attention.SDPBackend.EFFICIENT_ATTENTION}
                try:
                    with torch.nn.attention.sdpa_kernel(kinds[backend]):
                        med = median_ms(lambda: F.scaled_dot_product_attention(
                            q, k, v, is_causal=True, enable_gqa=True))
                except RuntimeError as err:
                    print(json.dumps({"L": L, "dtype": str(dtype), "backend": backend,
                                      "skipped": str(err).splitlines()[0][:200]}))
                    continue
                flops = 4.0 * pairs_per_head(L, 0) * 16 * 128
                print(json.dumps({"L": L, "dtype": str(dtype), "backend": backend,
                                  "median_ms": round(med, 4),
                                  "tflops": round(flops / (med * 1e-3) / 1e12, 1)}), flush=True)


if __name__ == "__main__":
    main()
