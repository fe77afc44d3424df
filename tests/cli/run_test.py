"""attntune run on tensors written by numpy/safetensors, checked against an independent
fp64 numpy implementation of DESIGN.md s1 (dense and swa with sinks, GQA, Lq < Lk; hybrid,
ks and dma with their optional tensors windows, scores, delta and a)."""
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


def sparse_reference(q, k, v, select, bias=None):
    """select(hkv, p) -> the attended keys j <= p; bias[b, hkv, j] added to the logits."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    B, Hq, Lq, d = q.shape
    Hkv, Lk = k.shape[1], k.shape[2]
    g = Hq // Hkv
    o = np.zeros_like(q)
    for b in range(B):
        for h in range(Hq):
            logits = q[b, h] @ k[b, h // g].T / np.sqrt(d)
            if bias is not None:
                logits = logits + bias[b, h // g][None, :]
            for i in range(Lq):
                keys = select(b, h // g, Lk - Lq + i)
                if len(keys) == 0:
                    continue
                x = logits[i, keys]
                w = np.exp(x - x.max())
                o[b, h, i] = (w / w.sum()) @ v[b, h // g][keys]
    return o


def top(score, p, n):
    """The n largest score[j], j <= p (ties: smaller j)."""
    j = np.arange(p + 1)
    order = np.lexsort((j, -score[: p + 1]))
    return np.sort(order[:n])


def check_sparse(variant, params, tensors, ref, label):
    src = os.path.join(tmp, "qkv.safetensors")
    dst = os.path.join(tmp, "o.safetensors")
    save_file(tensors, src)
    run("run", "--variant", variant, "--in", src, "--out", dst, "--params", params, check=0)
    o = load_file(dst)["o"]
    err = np.linalg.norm(o.astype(np.float64) - ref) / np.linalg.norm(ref)
    expect(err < 1e-5, f"run {variant} {params} {label}: rel err {err:.2e}")


def qkv(B, Hq, Hkv, L, d):
    return (rng.standard_normal((B, Hq, L, d)).astype(np.float32),
            rng.standard_normal((B, Hkv, L, d)).astype(np.float32),
            rng.standard_normal((B, Hkv, L, d)).astype(np.float32))


# hybrid with a windows tensor: head 0 full, head 1 w=1, head 2 w=9; sink 2.
q, k, v = qkv(1, 6, 3, 70, 64)
windows = np.array([0, 1, 9], dtype=np.int32)
def hybrid_select(b, h, p):
    j = np.arange(p + 1)
    w = windows[h]
    return j if w == 0 else j[(j > p - w) | (j < 2)]
check_sparse("hybrid", "w=5,full=0,sink=2", {"q": q, "k": k, "v": v, "windows": windows},
             sparse_reference(q, k, v, hybrid_select), "windows=[0,1,9]")
# The windows tensor alone is enough (DESIGN.md s1): no --params at all.
def hybrid_select_nosink(b, h, p):
    j = np.arange(p + 1)
    return j if windows[h] == 0 else j[j > p - windows[h]]
src = os.path.join(tmp, "hybrid.safetensors")
dst = os.path.join(tmp, "o.safetensors")
save_file({"q": q, "k": k, "v": v, "windows": windows}, src)
run("run", "--variant", "hybrid", "--in", src, "--out", dst, check=0)
ref = sparse_reference(q, k, v, hybrid_select_nosink)
err = np.linalg.norm(load_file(dst)["o"].astype(np.float64) - ref) / np.linalg.norm(ref)
expect(err < 1e-5, f"run hybrid with only a windows tensor: rel err {err:.2e}")
# Neither a windows tensor nor w: refused in one line naming both.
save_file({"q": q, "k": k, "v": v}, src)
p = run("run", "--variant", "hybrid", "--in", src, "--out", dst, check=2)
expect(p.stderr == "attntune: error: --params: hybrid/tiled requires parameter w (e.g. w=128) "
       "or a 'windows' tensor in the input file\n", f"hybrid without windows: {p.stderr!r}")

# ks with supplied scores, integer-valued so that ties occur.
q, k, v = qkv(2, 4, 2, 90, 64)
scores = rng.integers(0, 4, size=(2, 2, 90)).astype(np.float32)
check_sparse("ks", "k=12", {"q": q, "k": k, "v": v, "scores": scores},
             sparse_reference(q, k, v, lambda b, h, p: top(scores[b, h], p, 12)), "scores given")

# dma with supplied delta and a, bias on and off.
q, k, v = qkv(1, 4, 2, 80, 64)
delta = (rng.standard_normal((2, 64)) / 8).astype(np.float32)
a = np.array([0.7, 1.9], dtype=np.float32)
z = np.einsum("bhjd,hd->bhj", v.astype(np.float64), delta.astype(np.float64))
bj = a.astype(np.float64)[None, :, None] * np.logaddexp(0.0, z)
for bias in (0, 1):
    check_sparse("dma", f"w=10,bias={bias}", {"q": q, "k": k, "v": v, "delta": delta, "a": a},
                 sparse_reference(q, k, v, lambda b, h, p: top(bj[b, h], p, 10),
                                  bj if bias else None), "delta, a given")

# A malformed optional tensor is named with the shape it should have.
save_file({"q": q, "k": k, "v": v, "a": np.zeros(3, np.float32)}, os.path.join(tmp, "bad.safetensors"))
p = run("run", "--variant", "dma", "--in", os.path.join(tmp, "bad.safetensors"), "--out",
        os.path.join(tmp, "o.safetensors"), "--params", "w=4", check=2)
expect(p.stderr.strip().endswith("tensor 'a' has shape [3], expected [Hkv] = [2]"),
       f"bad 'a': {p.stderr.strip()}")

# A non-finite optional tensor is refused as q, k and v are (a NaN in a made every row NaN).
for name, value in (("a", np.array([0.7, np.nan], np.float32)),
                    ("delta", np.where(np.arange(delta.size).reshape(delta.shape) == 3, np.inf,
                                       delta).astype(np.float32))):
    tensors = {"q": q, "k": k, "v": v, "delta": delta, "a": a}
    tensors[name] = value
    path = os.path.join(tmp, f"nonfinite-{name}.safetensors")
    save_file(tensors, path)
    p = run("run", "--variant", "dma", "--in", path, "--out", os.path.join(tmp, "o.safetensors"),
            "--params", "w=4", check=2)
    bad_value = "nan" if name == "a" else "inf"
    element = 1 if name == "a" else 3
    expect(p.stderr.strip() == f"attntune: error: {path}: tensor '{name}' holds {bad_value} at "
           f"element {element} (attention needs finite inputs)", f"non-finite {name}: {p.stderr.strip()}")

# --out naming the --in file would replace q, k, v with o.
same = os.path.join(tmp, "same.safetensors")
save_file({"q": q, "k": k, "v": v}, same)
before = open(same, "rb").read()
p = run("run", "--variant", "dense", "--in", same, "--out", same, check=2)
expect(p.stderr.strip() == f"attntune: error: --out: '{same}' is the --in file (name another file)"
       and open(same, "rb").read() == before, f"--out = --in refused, the input kept: {p.stderr.strip()}")

# Inputs fp32 attention cannot take are refused in one line, never answered with zeros:
# a NaN in q, and q, k scaled so that the logits overflow (dense, swa and ks alike).
q, k, v = qkv(1, 2, 1, 16, 64)
bad = os.path.join(tmp, "nan.safetensors")
qn = q.copy()
qn[0, 1, 3, 5] = np.nan
save_file({"q": qn, "k": k, "v": v}, bad)
p = run("run", "--variant", "dense", "--in", bad, "--out", os.path.join(tmp, "o.safetensors"), check=2)
expect(p.stderr.strip() == f"attntune: error: {bad}: tensor 'q' holds nan at element "
       f"{(1 * 16 + 3) * 64 + 5} (attention needs finite inputs)", f"NaN in q: {p.stderr.strip()}")
huge = os.path.join(tmp, "huge.safetensors")
save_file({"q": q * np.float32(1e20), "k": k * np.float32(1e20), "v": v}, huge)
for variant, params in (("dense", ""), ("swa", "w=4"), ("ks", "k=4")):
    args = ["run", "--variant", variant, "--in", huge, "--out", os.path.join(tmp, "o.safetensors")]
    p = run(*(args + (["--params", params] if params else [])), check=2)
    expect("q and k are too large for fp32 attention" in p.stderr and p.stderr.count("\n") == 1,
           f"{variant} on huge q, k: {p.stderr.strip()}")
finish()
