"""attntune run on tensors written by numpy/safetensors, checked against an independent
fp64 numpy implementation of DESIGN.md s1 (dense and swa with sinks, GQA, Lq < Lk; hybrid,
ks and dma with their optional tensors windows, scores, delta and a; dma_decode with delta
and a, lsh with proj and mu under both rules, and hax with proj, mu and scores)."""
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
expect(p.stderr.strip() == f"attntune: error: {same}: is the --in file ({same}); give another output path"
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

# dma's bias is a logit term too: finite a and delta whose A softplus(v . delta) passes
# fp32's range gave every row NaN (+inf) or zeros (-inf hid every key), exit 0. With
# bias=0 the bias only ranks the keys, in fp64: that runs.
q, k, v = qkv(1, 2, 1, 8, 16)
v = np.abs(v) + np.float32(0.1)
for sign in (1, -1):
    big = os.path.join(tmp, f"big-bias{sign}.safetensors")
    save_file({"q": q, "k": k, "v": v, "a": np.array([sign * 1e35], np.float32),
               "delta": np.full((1, 16), 1e3, np.float32)}, big)
    for variant, params in (("dma", "w=3"), ("dma", "w=3,bias=1"), ("dma_decode", "w_kv=2,w_q=1,r=2")):
        for impl in ([], ["--impl", "generic"]):
            p = run("run", "--variant", variant, "--params", params, *impl, "--in", big, "--out",
                    os.path.join(tmp, "o.safetensors"))
            err = p.stderr.strip()
            expect(p.returncode == 2 and err.startswith(f"attntune: error: {big}: dma's bias A softplus")
                   and "at most 1e30" in err and "\n" not in err,
                   f"{variant} {params} {impl} with a = {sign}e35: exit {p.returncode}, {err!r}")
    p = run("run", "--variant", "dma", "--params", "w=3,bias=0", "--in", big, "--out",
            os.path.join(tmp, "o.safetensors"))
    o = load_file(os.path.join(tmp, "o.safetensors"))["o"] if p.returncode == 0 else None
    expect(o is not None and np.isfinite(o).all(), f"bias=0 runs on a = {sign}e35: {p.stderr.strip()}")

# dma_decode, lsh with supplied proj and mu, and hax: each checked, for the default impl and
# generic, against an fp64 reading of DESIGN.md s1 written from its text alone (the C++ tests
# compare two C++ readings with each other). Its own generator, so that cases added above
# leave these inputs, and the margins asserted on them, as they are.
rng2 = np.random.default_rng(20261129)


def set_reference(q, k, v, sets, bias=None):
    """o[b, h, i] = softmax over the keys sets[b][h][i] of q·k/sqrt(d) (+ bias[b, h//g, j])
    times v; zeros where the set is empty."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    B, Hq, Lq, d = q.shape
    g = Hq // k.shape[1]
    o = np.zeros_like(q)
    for b in range(B):
        for h in range(Hq):
            for i in range(Lq):
                keys = np.asarray(sets[b][h][i], dtype=np.int64)
                if len(keys) == 0:
                    continue
                x = k[b, h // g][keys] @ q[b, h, i] / np.sqrt(d)
                if bias is not None:
                    x = x + bias[b, h // g][keys]
                w = np.exp(x - x.max())
                o[b, h, i] = (w / w.sum()) @ v[b, h // g][keys]
    return o


def check_exact(variant, params, tensors, ref, label):
    """The default impl and generic, each within 1e-5 (absolute) of ref."""
    src = os.path.join(tmp, "sel.safetensors")
    dst = os.path.join(tmp, "o.safetensors")
    save_file(tensors, src)
    for impl in ([], ["--impl", "generic"]):
        run("run", "--variant", variant, "--in", src, "--out", dst, "--params", params, *impl,
            check=0)
        o = load_file(dst)["o"].astype(np.float64)
        err = np.abs(o - ref).max() if o.shape == ref.shape else np.inf
        expect(err < 1e-5, f"run {variant} {params} {' '.join(impl) or '(default impl)'} {label}: "
               f"max abs err {err:.2e}")


def dma_b(v, delta, a):
    """b_j = A_h * softplus(v_j · Delta_h), [B, Hkv, L]."""
    z = np.einsum("bhjd,hd->bhj", v.astype(np.float64), delta.astype(np.float64))
    return a.astype(np.float64)[None, :, None] * np.logaddexp(0.0, z)


def dma_decode_sets(q, k, bj, w_kv, w_q, r):
    """DESIGN.md s1, dma_decode: step t appends key t to the KV head's resident set I by the
    incremental rule, then query t attends I plus the w_q keys of largest q·k among C minus I,
    C = the r most recent keys (t-r+1..t) and the keys evicted from I in the last r steps
    (steps t-r+1..t, this one included)."""
    q, k = q.astype(np.float64), k.astype(np.float64)
    B, Hq, L, d = q.shape
    Hkv = k.shape[1]
    g = Hq // Hkv
    sets = [[[None] * L for _ in range(Hq)] for _ in range(B)]
    for b in range(B):
        for hk in range(Hkv):
            bb = bj[b, hk]
            # Ordering b decides I: any two b are equal (a tie, by construction) or far apart.
            gap = np.abs(bb[:, None] - bb[None, :])
            assert ((gap == 0) | (gap > 1e-5)).all(), "b too close to call in fp32"
            I = []
            evicted_at = {}  # step s -> the key that step s pushed out of I
            for t in range(L):
                if len(I) < w_kv:
                    I.append(t)
                else:
                    m = min(I, key=lambda j: (bb[j], j))  # the minimum b; ties: the smaller j
                    if bb[t] > bb[m]:
                        I.remove(m)
                        I.append(t)
                        evicted_at[t] = m
                recent = set(range(max(0, t - r + 1), t + 1))
                evicted = {evicted_at[s] for s in range(t - r + 1, t + 1) if s in evicted_at}
                C = sorted((recent | evicted) - set(I))
                for h in range(hk * g, (hk + 1) * g):
                    qk = k[b, hk][C] @ q[b, h, t] if C else np.zeros(0)
                    order = sorted(range(len(C)), key=lambda x: (-qk[x], C[x]))
                    if len(C) > w_q:
                        assert qk[order[w_q - 1]] - qk[order[w_q]] > 1e-4, "q·k too close to call"
                    sets[b][h][t] = sorted(I + [C[x] for x in order[:w_q]])
    return sets


# (B, L, d, w_kv, w_q, r, bias, kind): kind "random" b, "trend" (b rising with j, so that most
# steps evict), "ties" (b takes three values, so that the minimum is often tied).
dma_decode_cases = [
    (1, 16, 16, 3, 1, 1, 1, "random"),
    (1, 20, 16, 4, 2, 2, 0, "trend"),
    (2, 18, 16, 2, 2, 3, 1, "trend"),
    (1, 20, 16, 3, 1, 3, 0, "random"),
    (1, 20, 16, 3, 2, 2, 1, "ties"),
    (1, 14, 16, 2, 1, 1, 0, "ties"),
]
for B, L, d, w_kv, w_q, r, bias, kind in dma_decode_cases:
    Hq, Hkv = 4, 2
    q = rng2.standard_normal((B, Hq, L, d)).astype(np.float32)
    k = rng2.standard_normal((B, Hkv, L, d)).astype(np.float32)
    v = rng2.standard_normal((B, Hkv, L, d)).astype(np.float32)
    delta = (rng2.standard_normal((Hkv, d)) / 4).astype(np.float32)
    a = np.array([0.8, 1.6], dtype=np.float32)
    if kind == "trend":
        v[..., 0] = 0.25 * np.arange(L) + rng2.standard_normal((B, Hkv, L))
        delta[:, 0] = 1.0
    elif kind == "ties":
        v[..., 0] = rng2.integers(-1, 2, size=(B, Hkv, L))
        delta[:] = 0
        delta[:, 0] = 1.0
    bj = dma_b(v, delta, a)
    if kind == "ties":
        assert len(np.unique(bj[0, 0])) == 3
    sets = dma_decode_sets(q, k, bj, w_kv, w_q, r)
    check_exact("dma_decode", f"w_kv={w_kv},w_q={w_q},r={r},bias={bias}",
                {"q": q, "k": k, "v": v, "delta": delta, "a": a},
                set_reference(q, k, v, sets, bj if bias else None),
                f"B={B} L={L} b {kind}, delta and a given")


def lsh_bins(x, mu, R, rule):
    """DESIGN.md s1 LSH binning of the rows of x with one KV head's mu [d] and R [d, h]."""
    u = x.astype(np.float64) - mu.astype(np.float64)
    u = u / np.linalg.norm(u, axis=-1, keepdims=True)
    P = u @ R.astype(np.float64)
    h = R.shape[1]
    if rule == "sign":
        assert np.abs(P).min() > 1e-5, "a projection too close to 0 to call in fp32"
        return (P > 0).astype(np.int64) @ (2 ** np.arange(h - 1, -1, -1))
    top2 = np.sort(P, axis=-1)[:, -2:]
    assert (top2[:, 1] - top2[:, 0]).min() > 1e-5, "an argmax too close to call in fp32"
    return P.argmax(axis=-1)


def lsh_sets(q, k, mu, proj, rule, kk):
    """S(i) = the kk most recent j <= p(i) whose key bin equals query i's bin."""
    B, Hq, Lq, d = q.shape
    Hkv, Lk = k.shape[1], k.shape[2]
    g = Hq // Hkv
    sets = [[None] * Hq for _ in range(B)]
    for b in range(B):
        for h in range(Hq):
            hk = h // g
            kb = lsh_bins(k[b, hk], mu[hk], proj[hk], rule)
            qb = lsh_bins(q[b, h], mu[hk], proj[hk], rule)
            sets[b][h] = [[j for j in range(Lk - Lq + i + 1) if kb[j] == qb[i]][-kk:]
                          for i in range(Lq)]
    return sets


def lsh_inputs(B, Hq, Hkv, Lq, Lk, d, bits):
    q = rng2.standard_normal((B, Hq, Lq, d)).astype(np.float32)
    k = rng2.standard_normal((B, Hkv, Lk, d)).astype(np.float32)
    v = rng2.standard_normal((B, Hkv, Lk, d)).astype(np.float32)
    proj = rng2.standard_normal((Hkv, d, bits)).astype(np.float32)
    mu = (0.7 * rng2.standard_normal((Hkv, d))).astype(np.float32)
    return q, k, v, proj, mu


# lsh with supplied proj and mu, both rules; GQA, and Lq < Lk in one.
for B, Hq, Hkv, Lq, Lk, d, bits, rule, kk in ((2, 4, 2, 48, 48, 32, 3, "sign", 5),
                                             (1, 6, 3, 40, 72, 32, 4, "argmax", 6),
                                             (1, 4, 2, 60, 60, 16, 2, "sign", 3),
                                             (2, 4, 1, 50, 50, 32, 3, "argmax", 4)):
    q, k, v, proj, mu = lsh_inputs(B, Hq, Hkv, Lq, Lk, d, bits)
    check_exact("lsh", f"k={kk},bits={bits},rule={rule}",
                {"q": q, "k": k, "v": v, "proj": proj, "mu": mu},
                set_reference(q, k, v, lsh_sets(q, k, mu, proj, rule, kk)),
                f"B={B} Hq={Hq} Hkv={Hkv} Lq={Lq} Lk={Lk}, proj and mu given")

# hax: lsh(k_lsh) ∪ ks(k_ks), each key once; supplied proj, mu and integer scores (ks ties).
for B, Hq, Hkv, Lq, Lk, d, bits, rule, k_lsh, k_ks in ((1, 4, 2, 56, 56, 32, 3, "sign", 4, 4),
                                                     (2, 4, 2, 30, 64, 32, 4, "argmax", 3, 5)):
    q, k, v, proj, mu = lsh_inputs(B, Hq, Hkv, Lq, Lk, d, bits)
    scores = rng2.integers(0, 5, size=(B, Hkv, Lk)).astype(np.float32)
    ls = lsh_sets(q, k, mu, proj, rule, k_lsh)
    g = Hq // Hkv
    sets = [[[sorted(set(ls[b][h][i]) | set(top(scores[b, h // g], Lk - Lq + i, k_ks).tolist()))
              for i in range(Lq)] for h in range(Hq)] for b in range(B)]
    check_exact("hax", f"k_lsh={k_lsh},k_ks={k_ks},bits={bits},rule={rule}",
                {"q": q, "k": k, "v": v, "proj": proj, "mu": mu, "scores": scores},
                set_reference(q, k, v, sets),
                f"B={B} Lq={Lq} Lk={Lk}, proj, mu and scores given")
finish()
