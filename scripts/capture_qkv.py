#!/usr/bin/env python3
"""Captures a causal LM's own attention inputs for attntune: per chosen layer l, the
post-RoPE queries q.<l> [B,Hq,L,d] and keys and values k.<l>, v.<l> [B,Hkv,L,d] (F32),
written to one safetensors file with the capture's metadata. `attntune tune --calib`,
`bench --calib` and `allocate --calib` read it.

The capture hooks transformers' attention-function registry (AttentionInterface): every
attention layer of a model that dispatches through it hands its q, k and v, after RoPE
and any q/k norm, to the registered function, which records them and then runs the
model's own eager attention on them (with the model's mask, scaling, sliding window and
logit soft-capping), so that the forward pass goes on exactly as the model computes it.

Stored q is scaled by q_scale = scaling * sqrt(d) (metadata), so that attntune's
softmax(q k^T / sqrt(d)) is the model's softmax(q k^T * scaling): 1 for a model that
scales by 1/sqrt(d), other for Gemma's query_pre_attn_scalar.

    scripts/capture_qkv.py --model Qwen/Qwen3-1.7B --text prompt.txt --out qwen.safetensors
    scripts/capture_qkv.py --config tests/fixtures/capture/llama/config.json --seed 1 \\
        --tokens ids.json --out tiny.safetensors --with-output

Exit 0 on success; 2 with one line "capture_qkv: error: ..." for what it cannot capture.
"""
import argparse
import json
import math
import os
import sys


class CaptureError(Exception):
    """What the capture refuses: printed as one line, exit 2."""


def fail(message):
    raise CaptureError(message)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", help="a Hugging Face model id or a local model folder")
    src.add_argument("--config", help="a config.json: a model of that architecture with "
                     "random weights (seeded by --seed), as in tests")
    p.add_argument("--seed", type=int, default=0, help="seed of --config's random weights")
    inp = p.add_mutually_exclusive_group(required=True)
    inp.add_argument("--text", help="a UTF-8 text file, tokenized by the model's tokenizer")
    inp.add_argument("--tokens", help="token ids: a JSON list, or a list of equally long "
                     "lists (one sequence per batch row), or whitespace-separated integers")
    p.add_argument("--tokenizer", help="tokenizer folder or id (default: --model's)")
    p.add_argument("--max-tokens", type=int, default=0, help="keep the first N tokens (0: all)")
    p.add_argument("--layers", default="all", help="layers to capture: all, or 0,2,5")
    p.add_argument("--device", default="cpu", help="torch device (cpu, cuda, cuda:1)")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"],
                   help="the model's compute dtype (captured tensors are stored as F32)")
    p.add_argument("--with-output", action="store_true",
                   help="also store o.<l> [B,Hq,L,d], the model's own attention output")
    p.add_argument("--out", required=True, help="the safetensors file to write")
    return p.parse_args(argv)


def read_token_ids(path):
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        fail(f"--tokens: {path}: cannot read ({e.strerror})")
    try:
        ids = json.loads(text)
    except ValueError:
        try:
            ids = [int(t) for t in text.split()]
        except ValueError:
            fail(f"--tokens: {path}: neither JSON nor whitespace-separated integers")
    if isinstance(ids, list) and ids and all(isinstance(x, int) for x in ids):
        ids = [ids]
    ok = (isinstance(ids, list) and ids and
          all(isinstance(row, list) and row and all(isinstance(x, int) and not isinstance(x, bool)
                                                    for x in row) for row in ids))
    if not ok:
        fail(f"--tokens: {path}: expected a non-empty list of integers, or of such lists")
    if len({len(row) for row in ids}) != 1:
        fail(f"--tokens: {path}: sequences of lengths {sorted({len(r) for r in ids})}; every "
             "batch row must have the same length (no padding is captured)")
    return ids


def check_out(path):
    """Refuses an --out that cannot be written, before any model is loaded or run."""
    if os.path.isdir(path):
        fail(f"--out: {path}: is a folder; give the safetensors file to write")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        fail(f"--out: {path}: no such folder {folder}")
    if not os.access(folder, os.W_OK | os.X_OK):
        fail(f"--out: {path}: cannot write in the folder {folder}")


def check_device(name, torch):
    """Refuses a --device that torch does not know or this machine does not have."""
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError):
        fail(f"--device: '{name}' is not a torch device (cpu, cuda, cuda:1)")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            fail(f"--device: {name}: torch sees no CUDA device here (try --device cpu)")
        if device.index is not None and device.index >= torch.cuda.device_count():
            fail(f"--device: {name}: torch sees {torch.cuda.device_count()} CUDA device(s), "
                 f"cuda:0..cuda:{torch.cuda.device_count() - 1}")


def first_line(e):
    return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else 'no message'}"


def load_model(args, torch, transformers):
    dtype = getattr(torch, args.dtype)
    try:
        if args.config:
            config = transformers.AutoConfig.from_pretrained(args.config)
            torch.manual_seed(args.seed)
            model = transformers.AutoModelForCausalLM.from_config(
                config, attn_implementation="attntune_capture", dtype=dtype)
        else:
            model = transformers.AutoModelForCausalLM.from_pretrained(
                args.model, attn_implementation="attntune_capture", dtype=dtype)
    except CaptureError:
        raise
    except Exception as e:  # transformers raises many types; each is one line here
        what = "--config" if args.config else "--model"
        name = args.config or args.model
        fail(f"{what}: {name}: cannot load a causal LM ({first_line(e)})")
    try:
        return model.to(args.device).eval()
    except Exception as e:  # a device torch knows but cannot use here, or out of memory
        fail(f"--device: {args.device}: cannot place the model there ({first_line(e)})")


def tokenize(args, transformers, vocab_size):
    if args.tokens:
        ids = read_token_ids(args.tokens)
    else:
        source = args.tokenizer or args.model
        if not source:
            fail("--text: a model built from --config has no tokenizer (give --tokenizer DIR, "
                 "or --tokens)")
        try:
            tokenizer = transformers.AutoTokenizer.from_pretrained(source)
        except Exception as e:
            fail(f"--tokenizer: {source}: cannot load a tokenizer ({type(e).__name__})")
        try:
            with open(args.text, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as e:
            fail(f"--text: {args.text}: cannot read as UTF-8 text ({e})")
        ids = [tokenizer(text)["input_ids"]]
        if not ids[0]:
            fail(f"--text: {args.text}: no tokens")
    if args.max_tokens < 0:
        fail("--max-tokens: must be a non-negative integer")
    if args.max_tokens:
        ids = [row[:args.max_tokens] for row in ids]
    bad = [x for row in ids for x in row if x < 0 or x >= vocab_size]
    if bad:
        fail(f"--tokens: token id {bad[0]} is outside the model's vocabulary [0, {vocab_size})")
    return ids


def parse_layers(text, layers):
    if text == "all":
        return list(range(layers))
    try:
        chosen = sorted({int(x) for x in text.split(",")})
    except ValueError:
        fail(f"--layers: '{text}' is not 'all' or a comma-separated list of layer numbers")
    if not chosen or chosen[0] < 0 or chosen[-1] >= layers:
        fail(f"--layers: '{text}': the model has layers 0..{layers - 1}")
    return chosen


class Recorder:
    """The registered attention function: records q, k, v (and o) of the chosen layers,
    then runs the model's own eager attention."""

    def __init__(self, torch, layers, with_output):
        self.torch = torch
        self.layers = set(layers)
        self.with_output = with_output
        self.tensors = {}
        self.windows = {}
        self.scaling = {}
        self.softcap = {}
        self.error = None

    def __call__(self, module, query, key, value, attention_mask, scaling=None, dropout=0.0,
                 **kwargs):
        eager = getattr(sys.modules.get(type(module).__module__), "eager_attention_forward", None)
        layer = getattr(module, "layer_idx", None)
        if eager is None or layer is None:
            self.error = (f"{type(module).__name__} has no eager_attention_forward or layer_idx "
                          "in its module: attention that transformers' registry does not "
                          "describe cannot be captured")
            raise CaptureError(self.error)
        if not getattr(module, "is_causal", True):
            self.error = f"layer {layer} is not causal attention; attntune tunes causal attention"
            raise CaptureError(self.error)
        out, weights = eager(module, query, key, value, attention_mask, scaling=scaling,
                             dropout=dropout, **kwargs)
        if layer in self.layers:
            scale = scaling if scaling is not None else query.shape[-1] ** -0.5
            q_scale = scale * math.sqrt(query.shape[-1])
            f32 = self.torch.float32
            self.tensors[f"q.{layer}"] = (query.detach().to(f32) * q_scale).cpu().contiguous()
            self.tensors[f"k.{layer}"] = key.detach().to(f32).cpu().contiguous()
            self.tensors[f"v.{layer}"] = value.detach().to(f32).cpu().contiguous()
            if self.with_output:  # eager returns [B, L, Hq, d]
                self.tensors[f"o.{layer}"] = out.detach().to(f32).transpose(1, 2).cpu().contiguous()
            self.windows[layer] = kwargs.get("sliding_window") or 0
            self.scaling[layer] = q_scale
            self.softcap[layer] = kwargs.get("softcap")
        return out, weights


def capture(args):
    check_out(args.out)
    try:
        import torch
        import transformers
        from safetensors.torch import save_file
        from transformers import AttentionInterface
        from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, eager_mask
    except ImportError as e:
        fail(f"needs torch, transformers and safetensors ({e}); scripts/install-deps.sh --test "
             "installs them")
    if args.config and not os.path.isfile(args.config):
        fail(f"--config: {args.config}: no such file")
    check_device(args.device, torch)
    AttentionInterface.register("attntune_capture", lambda *a, **k: recorder(*a, **k))
    ALL_MASK_ATTENTION_FUNCTIONS.register("attntune_capture", eager_mask)
    model = load_model(args, torch, transformers)
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    layers = parse_layers(args.layers, config.num_hidden_layers)
    ids = tokenize(args, transformers, config.vocab_size)
    recorder = Recorder(torch, layers, args.with_output)
    try:
        with torch.no_grad():
            model(input_ids=torch.tensor(ids, device=args.device), use_cache=False)
    except CaptureError:
        raise
    except Exception as e:  # out of memory on the device, most often
        fail(f"the forward pass on {args.device} failed ({first_line(e)})")
    missing = [l for l in layers if f"q.{l}" not in recorder.tensors]
    if missing:
        fail(f"layer {missing[0]}: its attention never reached transformers' attention-function "
             "registry (the model's code does not dispatch through AttentionInterface); no "
             "q/k/v captured")
    heads, kv_heads = config.num_attention_heads, config.num_key_value_heads
    for l in layers:
        q, k = recorder.tensors[f"q.{l}"], recorder.tensors[f"k.{l}"]
        if q.shape[1] != heads or k.shape[1] != kv_heads:
            fail(f"layer {l}: q has {q.shape[1]} heads and k {k.shape[1]}, but the config says "
                 f"{heads} and {kv_heads}")
        for name in ("q", "k", "v"):
            if not torch.isfinite(recorder.tensors[f"{name}.{l}"]).all():
                fail(f"layer {l}: {name} holds a non-finite value (try --dtype float32)")
    softcaps = {c for c in recorder.softcap.values() if c}
    if softcaps:
        print(f"capture_qkv: note: the model caps its attention logits at {max(softcaps)} "
              "(tanh); attntune's variants do not, so their attention on these q, k, v differs "
              "from the model's where logits approach the cap", file=sys.stderr)
    metadata = {
        "format": "attntune-capture", "version": "1",
        "model": args.model or args.config,
        "model_type": str(getattr(config, "model_type", "")),
        "num_hidden_layers": str(config.num_hidden_layers),
        "num_attention_heads": str(heads), "num_key_value_heads": str(kv_heads),
        "head_dim": str(recorder.tensors[f"q.{layers[0]}"].shape[3]),
        "layers": ",".join(str(l) for l in layers),
        "tokens": str(len(ids[0])), "batch": str(len(ids)),
        "dtype": args.dtype, "device": args.device,
        "q_scale": ",".join(repr(recorder.scaling[l]) for l in layers),
        "layer_windows": ",".join(str(recorder.windows[l]) for l in layers),
        "attn_logit_softcapping": str(max(softcaps)) if softcaps else "",
        "seed": str(args.seed) if args.config else "",
        "torch": torch.__version__, "transformers": transformers.__version__,
    }
    try:
        save_file(recorder.tensors, args.out, metadata=metadata)
    except Exception as e:  # OSError, or safetensors' SafetensorError (a full disk, a folder gone)
        why = e.strerror if isinstance(e, OSError) and e.strerror else first_line(e)
        fail(f"--out: {args.out}: cannot write ({why})")
    print(f"capture_qkv: {len(layers)} layers x {len(ids)} x {len(ids[0])} tokens -> {args.out}")


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        capture(args)
    except CaptureError as e:
        print(f"capture_qkv: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
