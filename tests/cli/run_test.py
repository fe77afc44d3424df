"""attntune run on tensors written by numpy/safetensors, checked against an independent
fp64 numpy implementation of DESIGN.md s1 (dense and swa with sinks, GQA, Lq < Lk)."""
import os
import subprocess
import tempfile

import numpy as np
from safetensors.numpy import save_file, load_file

from clitest import run, expect, finish


def reference(q, k, v, window=None, sink=0, causal=True):
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    B, Hq, Lq, d = q.shape
    Hkv, Lk = k.shape[1], k.shape[2]
    g = Hq // Hkv
    o = np.zeros_like(q)
    j = np.arange(Lk)
    for b in range(B):
        for h in range(Hq):
            logits = q[b, h] @ k[b, h // g].T / np.sqrt(d)
            for i in range(Lq):
                p = Lk - Lq + i if causal else Lk - 1
                mask = j <= p
                if window is not None:
                    mask &= (j > p - window) | (j < sink)
                if not mask.any():
                    continue
                x = np.where(mask, logits[i], -np.inf)
                w = np.exp(x - x.max())
                o[b, h, i] = (w / w.sum()) @ v[b, h // g]
    return o


rng = np.random.default_rng(20261122)
tmp = tempfile.mkdtemp()
cases = [
    # (B, Hq, Hkv, Lq, Lk, d, variant, params)
    (1, 4, 2, 37, 37, 64, "dense", ""),
    (2, 6, 3, 33, 100, 64, "dense", ""),
    (1, 8, 2, 300, 300, 128, "dense", ""),
    (1, 4, 4, 129, 129, 128, "swa", "w=16,sink=4"),
    (1, 4, 1, 50, 200, 64, "swa", "w=7"),
    (2, 2, 1, 65, 65, 64, "swa", "w=1000,sink=2"),
]
for B, Hq, Hkv, Lq, Lk, d, variant, params in cases:
    q = rng.standard_normal((B, Hq, Lq, d)).astype(np.float32)
    k = rng.standard_normal((B, Hkv, Lk, d)).astype(np.float32)
    v = rng.standard_normal((B, Hkv, Lk, d)).astype(np.float32)
    src = os.path.join(tmp, "qkv.safetensors")
    dst = os.path.join(tmp, "o.safetensors")
    save_file({"q": q, "k": k, "v": v}, src)
    args = ["run", "--variant", variant, "--in", src, "--out", dst]
    if params:
        args += ["--params", params]
    p = run(*args, check=0)
    o = load_file(dst)["o"]
    kw = {}
    for kv in filter(None, params.split(",")):
        key, val = kv.split("=")
        kw["window" if key == "w" else key] = int(val)
    ref = reference(q, k, v, **kw)
    err = np.linalg.norm(o.astype(np.float64) - ref) / np.linalg.norm(ref)
    expect(o.shape == q.shape and err < 1e-5,
           f"run {variant} {params or '-'} B={B} Hq={Hq} Hkv={Hkv} Lq={Lq} Lk={Lk} d={d}: rel err {err:.2e}")
finish()
