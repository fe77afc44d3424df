"""A calibration set with planted attention structure, as scripts/capture_qkv.py writes
one, and a numpy reference of the quality a sliding window keeps on it.

Per layer, every query head is one of three kinds, built on a positional code p_j (unit
vectors of an AR(1) sequence, so that p_i . p_j ~ rho^|i-j|):
  local: q_i = beta p_i                         attends its own few neighbours;
  sink:  q_i = beta p_i + sink logit on dim D   attends the first SINKS keys most, and
                                                its neighbours;
  long:  q_i = beta p_(i - RANGE)               attends keys RANGE positions back.
Keys k_j = p_j (and SINK_SCALE on dim D for j < SINKS); values are Gaussian. A window
must reach RANGE back and keep the sinks to keep most of every head's mass.
"""
import json

import numpy as np

SINKS = 4
RANGE = 90
KINDS = [["local", "local", "sink", "long"],   # layer 0: query heads 0..3 (2 per KV head)
         ["long", "local", "sink", "sink"]]    # layer 1


def model_config(path, layers=2, heads=4, kv_heads=2, head_dim=32):
    """Writes the config.json of a model with this geometry."""
    with open(path, "w") as f:
        json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
                   "hidden_size": heads * head_dim, "num_hidden_layers": layers,
                   "num_attention_heads": heads, "num_key_value_heads": kv_heads,
                   "head_dim": head_dim}, f)


def positional_code(n, dim, rho, rng):
    r = np.zeros((n, dim))
    r[0] = rng.standard_normal(dim)
    c = np.sqrt(1 - rho * rho)
    for t in range(1, n):
        r[t] = rho * r[t - 1] + c * rng.standard_normal(dim)
    return r / np.linalg.norm(r, axis=1, keepdims=True)


def planted_tensors(length=512, head_dim=32, seed=7, beta=20.0, rho=0.95):
    """{"q.<l>": [1,4,L,d], "k.<l>", "v.<l>": [1,2,L,d]} (float32) for KINDS' layers."""
    rng = np.random.default_rng(seed)
    dim = head_dim - 1  # the last dimension carries the sink logit
    scale = np.sqrt(head_dim)  # attntune divides q.k by sqrt(d)
    tensors = {}
    for layer, kinds in enumerate(KINDS):
        q = np.zeros((1, len(kinds), length, head_dim))
        k = np.zeros((1, len(kinds) // 2, length, head_dim))
        codes = []
        for h in range(k.shape[1]):
            code = positional_code(length + RANGE, dim, rho, rng)  # positions -RANGE..L-1
            codes.append(code)
            k[0, h, :, :dim] = code[RANGE:]
            k[0, h, :SINKS, dim] = 1.0
        for h, kind in enumerate(kinds):
            code = codes[h // 2]
            if kind == "long":
                q[0, h, :, :dim] = beta * scale * code[:length]  # p_(i - RANGE)
            else:
                q[0, h, :, :dim] = beta * scale * code[RANGE:]
            if kind == "sink":
                q[0, h, :, dim] = (beta + 1.0) * scale  # sink keys: logit beta + 1 above
        v = rng.standard_normal(k.shape)
        tensors[f"q.{layer}"] = q.astype(np.float32)
        tensors[f"k.{layer}"] = k.astype(np.float32)
        tensors[f"v.{layer}"] = v.astype(np.float32)
    return tensors


def write_planted(path, model, **kwargs):
    from safetensors.numpy import save_file
    tensors = planted_tensors(**kwargs)
    layers = sorted(int(name[2:]) for name in tensors if name.startswith("q."))
    q = tensors["q.0"]
    save_file(tensors, path, metadata={
        "format": "attntune-capture", "version": "1", "model": model, "model_type": "llama",
        "num_hidden_layers": str(len(layers)), "layers": ",".join(map(str, layers)),
        "tokens": str(q.shape[2]), "batch": "1", "dtype": "float32"})
    return tensors


def swa_mass_recall(q, k, w, sink):
    """Per query head, the mean over rows of the dense attention mass swa(w, sink) keeps
    (DESIGN.md s1), in float64 from the definitions."""
    q = q.astype(np.float64)[0]
    k = k.astype(np.float64)[0]
    heads, length, d = q.shape
    group = heads // k.shape[0]
    i = np.arange(length)[:, None]
    j = np.arange(length)[None, :]
    causal = j <= i
    inside = causal & ((j > i - w) | (j < sink))
    out = []
    for h in range(heads):
        logits = q[h] @ k[h // group].T / np.sqrt(d)
        logits = np.where(causal, logits, -np.inf)
        logits -= logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        p /= p.sum(axis=1, keepdims=True)
        out.append(float((p * inside).sum(axis=1).mean()))
    return out


def layer_recalls(tensors, w, sink):
    """{layer: [mass_recall per query head]}."""
    layers = sorted(int(name[2:]) for name in tensors if name.startswith("q."))
    return {l: swa_mass_recall(tensors[f"q.{l}"], tensors[f"k.{l}"], w, sink) for l in layers}
