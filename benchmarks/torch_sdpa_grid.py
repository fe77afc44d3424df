#!/usr/bin/env python3
"""Times PyTorch's scaled_dot_product_attention (its flash, cuDNN and efficient backends)
over a grid of problems, as the libraries a user already has, beside `attntune tune` on
the same GPU (scripts/gpu-checks.sh, step grid). Not a test; needs torch with CUDA.

  torch_sdpa_grid.py --heads 16:8,32:8 --dims 128,64 --lengths 4096,16384 \
      --decode 4096,65536 --dtypes fp16,bf16

Prefill: B=1, causal, Lq = Lk = L. Decode: one query row per head against Lk keys.
Prints one JSON object per line: source "torch", backend, phase, dtype, Hq, Hkv, d, L,
events_ms (CUDA events around one call, median of 20 after 3 warm-ups), kernel_ms (the
call's kernels summed, mean of 20, from torch.profiler: CUPTI, as attntune times) and
median_ms (kernel_ms where the profiler gave it, else events_ms), or "skipped".
PyTorch has no sliding-window SDPA (a window needs a mask, which its flash backend
refuses), so the windowed problems are not timed here."""
import argparse
import json

import torch
import torch.nn.functional as F

BACKENDS = {"flash": torch.nn.attention.SDPBackend.FLASH_ATTENTION,
            "cudnn": torch.nn.attention.SDPBackend.CUDNN_ATTENTION,
            "efficient": torch.nn.attention.SDPBackend.EFFICIENT_ATTENTION}
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def median_ms(run, reps=20):
    for _ in range(3):
        run()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        s.record()
        run()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    times.sort()
    return times[len(times) // 2]


def kernel_ms(run, reps=20):
    """The mean summed time of the CUDA kernels of one run, from torch.profiler (CUPTI, as
    attntune's own timer): comparable with attntune's median_ms where launch gaps matter
    (decode). None where the profiler gives no kernel times."""
    from torch.profiler import ProfilerActivity, profile
    run()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            run()
        torch.cuda.synchronize()
    total_us = 0.0
    for e in prof.events():
        us = getattr(e, "device_time", None)
        if us is None:
            us = getattr(e, "cuda_time", 0.0)
        if getattr(e, "device_type", None) is not None and "CUDA" in str(e.device_type):
            total_us += us
    return total_us / reps / 1e3 if total_us > 0 else None


def time_problem(phase, dtype, hq, hkv, d, L):
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(7)
    lq = 1 if phase == "decode" else L
    q = torch.randn(1, hq, lq, d, device=dev, dtype=DTYPES[dtype], generator=g)
    k = torch.randn(1, hkv, L, d, device=dev, dtype=DTYPES[dtype], generator=g)
    v = torch.randn(1, hkv, L, d, device=dev, dtype=DTYPES[dtype], generator=g)
    for name, backend in BACKENDS.items():
        rec = {"source": "torch", "backend": name, "phase": phase, "dtype": dtype,
               "Hq": hq, "Hkv": hkv, "d": d, "L": L}
        try:
            with torch.nn.attention.sdpa_kernel(backend):
                run = lambda: F.scaled_dot_product_attention(
                    q, k, v, is_causal=(phase == "prefill"), enable_gqa=True)
                rec["events_ms"] = round(median_ms(run), 4)
                try:
                    kms = kernel_ms(run)
                except Exception as err:  # a profiler without kernel times: events only
                    kms = None
                    rec["profiler"] = str(err).splitlines()[0][:120]
                rec["kernel_ms"] = round(kms, 4) if kms else None
                rec["median_ms"] = rec["kernel_ms"] or rec["events_ms"]
        except RuntimeError as err:
            rec["skipped"] = str(err).splitlines()[0][:200]
        print(json.dumps(rec), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--heads", default="16:8,32:8", help="Hq:Hkv pairs")
    ap.add_argument("--dims", default="128,64")
    ap.add_argument("--lengths", default="4096,16384", help="prefill lengths")
    ap.add_argument("--decode", default="4096,65536", help="decode lengths (Lk)")
    ap.add_argument("--dtypes", default="fp16,bf16")
    a = ap.parse_args()
    ints = lambda s: [int(x) for x in s.split(",") if x]
    print(json.dumps({"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
                      "cudnn": torch.backends.cudnn.version()}), flush=True)
    for dtype in a.dtypes.split(","):
        for pair in a.heads.split(","):
            hq, hkv = (int(x) for x in pair.split(":"))
            for d in ints(a.dims):
                for L in ints(a.lengths):
                    time_problem("prefill", dtype, hq, hkv, d, L)
                for L in ints(a.decode):
                    time_problem("decode", dtype, hq, hkv, d, L)


if __name__ == "__main__":
    main()
