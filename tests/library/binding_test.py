"""The Python binding (attntune.attention) on the consumer example's inputs:
usage: binding_test.py NPY_DIR attntune_config.json other_device.json

- each variant's tuned configuration, looked up in attntune_config.json, is the one the C++
  consumer used, and the binding's output equals the C++ API's bit for bit;
- the same through DLPack capsules (no buffer protocol), into an `out` given by DLPack;
- the output matches a numpy fp64 reference written from DESIGN.md s1 (rel_err < 1e-5);
- refusals are attntune.UserError with the library's one line."""
import os
import pathlib
import sys

import numpy as np

import attntune

npy_dir, config_json, other_json = sys.argv[1:4]
failures = []


def expect(cond, message):
    print(("ok: " if cond else "FAIL: ") + message, flush=True)
    if not cond:
        failures.append(message)


def load(name):
    return np.load(os.path.join(npy_dir, name))


def optional(variant):
    out = {}
    for name in ["scores", "delta", "a", "mu", "proj", "windows"]:
        path = os.path.join(npy_dir, f"{variant}.{name}.npy")
        if os.path.exists(path):
            out[name] = np.load(path)
    return out


def params_of(text):
    return {k: v for k, v in (item.split("=") for item in text.split(",") if item)}


def topk(x, p, k):
    """The k keys j <= p of largest x[j], ties: smaller j."""
    order = np.argsort(-x[:p + 1], kind="stable")[:k]
    return set(order.tolist())


def reference(variant, p, q, k, v, opt):
    """O [B,Hq,L,d] in fp64 from the definitions (causal, Lq = Lk)."""
    B, Hq, L, d = q.shape
    Hkv = k.shape[1]
    g = Hq // Hkv
    q64, k64, v64 = (x.astype(np.float64) for x in (q, k, v))
    out = np.zeros(q.shape)
    for b in range(B):
        for h in range(Hq):
            hk = h // g
            logits = q64[b, h] @ k64[b, hk].T / np.sqrt(d)
            bias = np.zeros(L)
            if variant == "dma":
                z = v64[b, hk] @ opt["delta"][hk].astype(np.float64)
                x = opt["a"][hk] * np.logaddexp(0.0, z)
                if int(p["bias"]) == 1:
                    bias = x
            if variant == "hax":
                bits = int(p["bits"])
                def bins(rows):
                    proj = (rows - opt["mu"][hk]) @ opt["proj"][hk].astype(np.float64)
                    if p["rule"] == "argmax":
                        return np.argmax(proj, axis=1)
                    return ((proj > 0) * (1 << np.arange(bits - 1, -1, -1))).sum(axis=1)
                key_bin, query_bin = bins(k64[b, hk]), bins(q64[b, h])
            mask = np.zeros((L, L), dtype=bool)
            for i in range(L):
                if variant in ("dense", "swa", "hybrid"):
                    w = {"dense": 0, "swa": int(p.get("w", 0)),
                         "hybrid": int(opt["windows"][hk]) if variant == "hybrid" else 0}[variant]
                    sink = int(p.get("sink", 0))
                    lo = max(0, i - w + 1) if w > 0 else 0
                    keys = set(range(lo, i + 1)) | set(range(min(sink, lo)))
                elif variant == "ks":
                    keys = topk(opt["scores"][b, hk].astype(np.float64), i, int(p["k"]))
                elif variant == "dma":
                    keys = topk(x, i, int(p["w"]))
                else:  # hax
                    same = [j for j in range(i, -1, -1) if key_bin[j] == query_bin[i]]
                    keys = set(same[:int(p["k_lsh"])])
                    keys |= topk(opt["scores"][b, hk].astype(np.float64), i, int(p["k_ks"]))
                mask[i, sorted(keys)] = True
            z = np.where(mask, logits + bias[None, :], -np.inf)
            z = np.exp(z - z.max(axis=1, keepdims=True))
            out[b, h] = (z / z.sum(axis=1, keepdims=True)) @ v64[b, hk]
    return out


class DLPackOnly:
    """A tensor seen only through __dlpack__ (as a PyTorch tensor is)."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, stream=None):
        return self.array.__dlpack__()

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


q, k, v = load("q.npy"), load("k.npy"), load("v.npy")
_, _, L, d = q.shape
expect(attntune.api_version() == attntune._attntune.API_VERSION, "binding and library share the API version")
tuned = attntune.load_config(config_json)
for variant in ["dense", "swa", "hybrid", "ks", "dma", "hax"]:
    impl, params, tunables = open(os.path.join(npy_dir, f"{variant}.config.txt")).read().split("\n")[:3]
    cfg = tuned.lookup(variant, head_dim=d, seq_len=L)
    expect((cfg.implementation, cfg.params, cfg.tunables) == (impl, params, tunables),
           f"{variant}: attntune_config.json gives the consumer's configuration {cfg}")
    opt = optional(variant)
    cpp = load(f"{variant}.o.npy")
    o = attntune.attention(q, k, v, config=cfg, **opt)
    expect(o.dtype == np.float32 and o.shape == q.shape, f"{variant}: output float32 {q.shape}")
    expect(np.array_equal(o.view(np.uint32), cpp.view(np.uint32)),
           f"{variant}: the binding's output equals the C++ API's bit for bit")
    out = np.full_like(q, np.nan)
    attntune.attention(DLPackOnly(q), DLPackOnly(k), DLPackOnly(v), config=cfg, out=DLPackOnly(out),
                       **{n: DLPackOnly(x) for n, x in opt.items()})
    expect(np.array_equal(out.view(np.uint32), cpp.view(np.uint32)),
           f"{variant}: through DLPack capsules, bit for bit too")
    ref = reference(variant, params_of(params), q, k, v, opt)
    rel_err = np.linalg.norm(o - ref) / np.linalg.norm(ref)
    expect(rel_err < 1e-5, f"{variant}: rel_err {rel_err:.3g} against numpy fp64 < 1e-5")
    # By hand, as a dict in the JSON's entry form: the same configuration, the same bits.
    entry = {"implementation": impl, "params": params_of(params), "tunables": params_of(tunables)}
    o2 = attntune.attention(q, k, v, variant=variant, config=entry, **opt)
    expect(np.array_equal(o2.view(np.uint32), cpp.view(np.uint32)), f"{variant}: the same by hand")


def refusal(fn, expected):
    try:
        fn()
    except attntune.UserError as e:
        expect(str(e) == expected and isinstance(e, ValueError), f"refused in one line: {e}")
        return
    expect(False, f"no refusal; expected {expected}")


# The configuration's constructors and lookup: wrong Python types in one line too.
refusal(lambda: attntune.Config(None),
        "attntune: error: variant: a str is expected, not NoneType")
refusal(lambda: attntune.Config("swa", "tiled", {"w": 256}),
        "attntune: error: params: a str is expected, not dict")
refusal(lambda: attntune.load_config(123),
        "attntune: error: path: a str or os.PathLike is expected, not int")
refusal(lambda: attntune.load_config(config_json, quiet="yes"),
        "attntune: error: quiet: True or False is expected, not str")
refusal(lambda: attntune.device_name(0),
        "attntune: error: device: a str is expected, not int")
refusal(lambda: tuned.lookup("swa", head_dim="128", seq_len=L),
        "attntune: error: head_dim: an int is expected, not str")
refusal(lambda: tuned.lookup("swa", head_dim=d, seq_len=2**40),
        f"attntune: error: seq_len: {2**40} is out of range")
refusal(lambda: tuned.lookup("swa", head_dim=d, seq_len=L, min_mass_recall="0.9"),
        "attntune: error: min_mass_recall: a number is expected, not str")
by_path = attntune.load_config(pathlib.Path(config_json)).lookup("swa", head_dim=d, seq_len=L)
expect(by_path.variant == "swa", f"a pathlib.Path config file: {by_path}")
numpy_args = tuned.lookup("swa", head_dim=np.int64(d), seq_len=np.int32(L),
                          min_mass_recall=np.float32(0.0))
expect(numpy_args.params == by_path.params, f"numpy's integers and floats as arguments: {numpy_args}")
refusal(lambda: tuned.lookup("swa", head_dim=True, seq_len=L),
        "attntune: error: head_dim: an int is expected, not bool")
refusal(lambda: tuned.lookup("swa", head_dim=d, seq_len=L, min_mass_recall=np.bool_(True)),
        "attntune: error: min_mass_recall: a number is expected, not " + type(np.bool_(True)).__name__)

cpu = attntune.device_name()
other = attntune.load_config(other_json)
refusal(lambda: other.lookup("swa", head_dim=d, seq_len=L),
        f"attntune: error: {other_json}: entry swa prefill d={d} L=512: tuned on 'Other CPU', this "
        f"is '{cpu}' (cpu) (tune on this device, or allow_other_device to use it with a warning)")
allowed = attntune.load_config(other_json, allow_other_device=True, quiet=True).lookup("swa", head_dim=d, seq_len=L)
expect("tuned on 'Other CPU'" in allowed.warning, f"allowed explicitly, with a warning: {allowed.warning}")
refusal(lambda: attntune.attention(q.astype(np.float64), k, v, variant="dense"),
        "attntune: error: q: dtype float64 is not float32, float16 or bfloat16")
refusal(lambda: attntune.attention(q[:, :, ::2], k, v, variant="dense"),
        "attntune: error: q: the array is not C-contiguous (np.ascontiguousarray makes a copy that is)")
refusal(lambda: attntune.attention(q, k, v, variant="swa"),
        "attntune: error: config: swa/tiled requires parameter w (e.g. w=128)")
bad = q.copy()
bad[0, 0, 3, 1] = np.nan
refusal(lambda: attntune.attention(bad, k, v, variant="dense"),
        "attntune: error: tensors: tensor 'q' holds nan at element 97 (attention needs finite inputs)")
refusal(lambda: attntune.attention(q, k, v, variant="dense", windows=np.zeros(3, np.int32)),
        f"attntune: error: windows: shape (3,) is not [Hkv] = ({k.shape[1]},)")

# Arguments of the wrong Python type: the same one-line UserError, never pybind11's text.
refusal(lambda: attntune.attention(q, k, v, variant=3),
        "attntune: error: variant: a str is expected, not int")
refusal(lambda: attntune.attention(q, k, v, variant="swa", params=5),
        "attntune: error: params: a dict or 'name=value,...' text is expected, not int")
refusal(lambda: attntune.attention(q, k, v, variant="swa", config={"params": [1]}),
        "attntune: error: params: a dict or 'name=value,...' text is expected, not list")
refusal(lambda: attntune.attention(q, k, v, variant="dense", causal="no"),
        "attntune: error: causal: True or False is expected, not str")
refusal(lambda: attntune.attention(q, k, v, variant="dense", stream="0"),
        "attntune: error: stream: a CUDA stream handle (int, e.g. "
        "torch.cuda.current_stream().cuda_stream) is expected, not str")
refusal(lambda: attntune.attention(q, k, v, variant="dense", stream=0),
        "attntune: error: stream: given for tensors on the CPU (a CUDA stream orders work on a "
        "GPU; leave it out)")
refusal(lambda: attntune.attention(DLPackOnly(q.astype(np.float64)), k, v, variant="dense", out=np.empty_like(q)),
        "attntune: error: q: dtype float64 is not float32, float16 or bfloat16")


class RefusesDLPack(DLPackOnly):
    def __dlpack__(self, stream=None):
        raise BufferError("cannot export")


refusal(lambda: attntune.attention(RefusesDLPack(q), k, v, variant="dense", out=np.empty_like(q)),
        "attntune: error: q: its __dlpack__ refused (BufferError: cannot export)")
# The output over an input: refused, the input untouched.
in_place = q.copy()
refusal(lambda: attntune.attention(in_place, k, v, variant="dense", out=in_place),
        "attntune: error: tensors: the output shares memory with 'q' (it must not overlap an "
        "input: give the output a buffer of its own)")
expect(np.array_equal(in_place, q), "the refused call left q as it was")
# hybrid's windows tensor stands for w and full.
windows = np.array([0] + [3] * (k.shape[1] - 1), np.int32)
by_tensor = attntune.attention(q, k, v, variant="hybrid", windows=windows)
given = attntune.attention(q, k, v, variant="hybrid", params={"w": 3, "full": 1})
expect(np.array_equal(by_tensor, given), "hybrid with a windows tensor needs no w")

# A config dict and an argument that disagree: the dict's value won without a word
# (variant="dense" ran swa).
refusal(lambda: attntune.attention(q, k, v, variant="dense",
                                   config={"variant": "swa", "implementation": "tiled",
                                           "params": {"w": 4}}),
        "attntune: error: variant: 'dense' is not the config's 'swa' (give it one way)")
refusal(lambda: attntune.attention(q, k, v, variant="swa", params={"w": 8}, config={"params": {"w": 4}}),
        "attntune: error: params: {'w': 8} is not the config's {'w': 4} (give it one way)")
# A parameter value holding a separator set another parameter.
refusal(lambda: attntune.attention(q, k, v, variant="swa", params={"w": "1,sink=2"}),
        "attntune: error: params: w=1,sink=2 holds ',' or '=' (a parameter's name and value are "
        "integers or words)")
# A stream handle out of range was pybind11's TypeError of several hundred lines.
refusal(lambda: attntune.attention(q, k, v, variant="dense", stream=-1),
        "attntune: error: stream: -1 is not a CUDA stream handle (0 to 2^64 - 1)")
# A NUL ended the text the C API read ("swa\0junk" was swa); a number past double's range
# was a bare OverflowError.
refusal(lambda: attntune.Config("swa\0junk", "tiled", "w=4"),
        "attntune: error: variant: holds a NUL character")
refusal(lambda: tuned.lookup("swa", head_dim=d, seq_len=L, min_mass_recall=10**400),
        "attntune: error: min_mass_recall: " + str(10**400)[:40] + " is out of range")
# A file name that is not UTF-8 (open() reads it) was pybind11's RuntimeError.
import shutil
import subprocess
import tempfile
odd_dir = tempfile.mkdtemp()
odd = os.path.join(os.fsencode(odd_dir), b"config\xff.json")
shutil.copy(config_json, odd)
odd_cfg = attntune.load_config(os.fsdecode(odd)).lookup("swa", head_dim=d, seq_len=L)
expect(odd_cfg.variant == "swa", "load_config reads a file whose name is not UTF-8")
# A DLPack tensor refused by the binding's own checks (here: not contiguous) is released:
# its capsule's deleter was never called, and the tensor leaked (256 MB a call with torch).
base = np.ascontiguousarray(q.transpose(0, 1, 3, 2)).transpose(0, 1, 3, 2)
before = sys.getrefcount(base)
for _ in range(5):
    try:
        attntune.attention(DLPackOnly(base), k, v, variant="dense", out=np.empty_like(q))
    except attntune.UserError:
        pass
expect(sys.getrefcount(base) == before,
       f"a refused DLPack tensor is released ({before} references before, {sys.getrefcount(base)} after)")
# First calls from several threads at once: numpy's C API was looked up under a C++
# static's lock by the first call, and two threads deadlocked (8 runs in 10).
threads = r"""
import threading, numpy as np, attntune
q = np.random.default_rng(0).standard_normal((1, 2, 8, 16), dtype=np.float32)
barrier = threading.Barrier(8)
def work():
    barrier.wait()
    attntune.attention(q, q, q, variant="dense")
ts = [threading.Thread(target=work) for _ in range(8)]
[t.start() for t in ts]
[t.join() for t in ts]
print("done")
"""
for attempt in range(3):
    try:
        p = subprocess.run([sys.executable, "-c", threads], capture_output=True, text=True, timeout=60)
        ok = p.returncode == 0 and p.stdout.strip() == "done"
    except subprocess.TimeoutExpired:
        ok = False
    expect(ok, f"eight threads' first calls at once end (attempt {attempt + 1})")

print(f"{len(failures)} check(s) failed" if failures else "all checks passed")
sys.exit(1 if failures else 0)
