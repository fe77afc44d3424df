"""scripts/capture_qkv.py on small randomly initialised models (config.json fixtures in
tests/fixtures/capture: Llama, Qwen2 with sliding layers, Qwen3, Mistral, Gemma 2, Gemma 3;
no weights downloaded): the captured q, k, v of every layer, run through `attntune run`
(dense, or swa at the layer's own sliding window), give the model's own attention output
(transformers' eager attention with the same mask) to fp32 tolerance; a capture feeds
`attntune tune --calib`; what the script cannot capture is refused in one line, exit 2.

The captures run in this process (the script imported once: importing torch costs
seconds); one runs through the command line, as a user runs it."""
import contextlib
import importlib.util
import io
import json
import os
import subprocess
import sys
import tempfile

os.environ["HF_HUB_OFFLINE"] = "1"  # nothing is fetched from a hub, ever
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file

from clitest import FIXTURES, expect, finish, run

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "capture_qkv.py")
spec = importlib.util.spec_from_file_location("capture_qkv", SCRIPT)
capture_qkv = importlib.util.module_from_spec(spec)
spec.loader.exec_module(capture_qkv)

tmp = tempfile.mkdtemp()
ids = os.path.join(tmp, "ids.json")
rng = np.random.default_rng(3)
with open(ids, "w") as f:  # two sequences of 40 tokens: a batch of 2
    json.dump(rng.integers(0, 128, size=(2, 40)).tolist(), f)


def capture(*args):
    """(exit code, stderr) of capture_qkv.main(args)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = capture_qkv.main(list(args))
    return code, err.getvalue()


def config(name):
    return os.path.join(FIXTURES, "capture", name, "config.json")


def relative_error(a, b):
    return float(np.linalg.norm(a.astype(np.float64) - b) / np.linalg.norm(b.astype(np.float64)))


# --- every layer of every architecture round-trips into attntune run ------------------------
for name in ["llama", "qwen2", "qwen3", "mistral", "gemma2", "gemma3"]:
    path = os.path.join(tmp, f"{name}.safetensors")
    code, err = capture("--config", config(name), "--seed", "1", "--tokens", ids,
                        "--with-output", "--out", path)
    expect(code == 0, f"{name}: captured ({err.strip()})")
    if code != 0:
        continue
    tensors = load_file(path)
    with safe_open(path, "np") as f:
        meta = f.metadata()
    layers = [int(l) for l in meta["layers"].split(",")]
    windows = [int(w) for w in meta["layer_windows"].split(",")]
    expect(layers == [0, 1, 2] and meta["tokens"] == "40" and meta["batch"] == "2",
           f"{name}: metadata names the layers, tokens and batch")
    for layer, window in zip(layers, windows):
        o = os.path.join(tmp, f"{name}.{layer}.o.safetensors")
        variant = ["--variant", "dense"] if window == 0 else [
            "--variant", "swa", "--params", f"w={window},sink=0"]
        p = run("run", "--in", path, "--layer", str(layer), *variant, "--out", o)
        expect(p.returncode == 0, f"{name} layer {layer}: attntune run ({p.stderr.strip()})")
        if p.returncode != 0:
            continue
        err = relative_error(load_file(o)["o"], tensors[f"o.{layer}"])
        expect(err < 1e-5, f"{name} layer {layer} ({'window ' + str(window) if window else 'full'}): "
                           f"attntune's output is the model's, relative error {err:.2e}")
    if name in ("qwen2", "mistral", "gemma2", "gemma3"):
        expect(any(windows), f"{name}: a sliding layer was captured with its window ({windows})")

# The check can fail: the model's sliding layer run as dense is not the model's output.
gemma = load_file(os.path.join(tmp, "gemma2.safetensors"))
p = run("run", "--in", os.path.join(tmp, "gemma2.safetensors"), "--layer", "0", "--variant", "dense",
        "--out", os.path.join(tmp, "wrong.safetensors"))
wrong = relative_error(load_file(os.path.join(tmp, "wrong.safetensors"))["o"], gemma["o.0"])
expect(wrong > 1e-2, f"a sliding layer run without its window differs ({wrong:.2e})")

# Soft-capped logits (Gemma 2's default): captured, with a note and the cap in the metadata.
path = os.path.join(tmp, "softcap.safetensors")
code, err = capture("--config", config("gemma2-softcap"), "--tokens", ids, "--out", path)
expect(code == 0 and "caps its attention logits at 50.0" in err, "a soft-capped model is captured with a note")

# --- the command line, as a user runs it; and the capture feeds tune --calib ---------------
cap = os.path.join(tmp, "cli.safetensors")
p = subprocess.run([sys.executable, SCRIPT, "--config", config("qwen3"), "--seed", "2",
                    "--tokens", ids, "--layers", "0,2", "--out", cap],
                   capture_output=True, text=True, stdin=subprocess.DEVNULL)
expect(p.returncode == 0 and p.stdout == f"capture_qkv: 2 layers x 2 x 40 tokens -> {cap}\n",
       f"the command line captures ({p.stdout!r} {p.stderr!r})")
out = os.path.join(tmp, "tune")
p = run("tune", "--model", config("qwen3"), "--calib", cap, "--variants", "dense,swa", "--budget", "2",
        "--max-seconds", "0.02", "--out", out, check=0)
expect("L=40" in p.stderr + p.stdout and p.returncode == 0, "tune --calib runs on the capture at its length")

# --- what cannot be captured: one line, exit 2 ------------------------------------------------
def refused(args, expected, what):
    code, err = capture(*args)
    expect(code == 2 and err == f"capture_qkv: error: {expected}\n",
           f"{what}: exit {code}, stderr {err!r}")


llama = config("llama")
refused(["--config", llama, "--tokens", ids, "--layers", "0,7", "--out", cap],
        "--layers: '0,7': the model has layers 0..2", "a layer beyond the model")
refused(["--config", llama, "--tokens", ids, "--layers", "first", "--out", cap],
        "--layers: 'first' is not 'all' or a comma-separated list of layer numbers", "a bad layer list")
ragged = os.path.join(tmp, "ragged.json")
with open(ragged, "w") as f:
    json.dump([[1, 2, 3], [4, 5]], f)
refused(["--config", llama, "--tokens", ragged, "--out", cap],
        f"--tokens: {ragged}: sequences of lengths [2, 3]; every batch row must have the same "
        "length (no padding is captured)", "rows of different lengths")
big = os.path.join(tmp, "big.json")
with open(big, "w") as f:
    json.dump([1, 2, 500], f)
refused(["--config", llama, "--tokens", big, "--out", cap],
        "--tokens: token id 500 is outside the model's vocabulary [0, 128)", "a token outside the vocabulary")
text = os.path.join(tmp, "text.txt")
with open(text, "w") as f:
    f.write("hello")
refused(["--config", llama, "--text", text, "--out", cap],
        "--text: a model built from --config has no tokenizer (give --tokenizer DIR, or --tokens)",
        "text without a tokenizer")
refused(["--config", os.path.join(tmp, "none.json"), "--tokens", ids, "--out", cap],
        f"--config: {os.path.join(tmp, 'none.json')}: no such file", "a missing config")
nonsense = os.path.join(tmp, "nonsense.json")
with open(nonsense, "w") as f:
    json.dump({"model_type": "no_such_architecture"}, f)
code, err = capture("--config", nonsense, "--tokens", ids, "--out", cap)
expect(code == 2 and err.startswith(f"capture_qkv: error: --config: {nonsense}: cannot load a causal LM (")
       and err.count("\n") == 1, f"an unknown architecture: {err!r}")

# An --out that cannot be written and a --device this machine lacks are refused in one line
# before any model is loaded (not after the forward pass, losing it); the write itself, if it
# fails all the same, is one line too, never a traceback.
def refused_early(args, expected, what):
    loads = []
    load_model = capture_qkv.load_model
    capture_qkv.load_model = lambda *a: loads.append(a) or load_model(*a)
    try:
        code, err = capture(*args)
    except Exception as e:  # what the script let escape
        code, err = None, f"{type(e).__name__}: {e}"
    finally:
        capture_qkv.load_model = load_model
    expect(code == 2 and err == f"capture_qkv: error: {expected}\n" and not loads,
           f"{what}: exit {code}, stderr {err!r}, a model loaded first: {bool(loads)}")


gone = os.path.join(tmp, "no-such-folder")
refused_early(["--config", llama, "--tokens", ids, "--out", os.path.join(gone, "x.safetensors")],
              f"--out: {os.path.join(gone, 'x.safetensors')}: no such folder {gone}",
              "an --out in a missing folder")
refused_early(["--config", llama, "--tokens", ids, "--out", tmp],
              f"--out: {tmp}: is a folder; give the safetensors file to write",
              "an --out that is a folder")
refused_early(["--config", llama, "--tokens", ids, "--out", cap, "--device", "gpu"],
              "--device: 'gpu' is not a torch device (cpu, cuda, cuda:1)", "an unknown --device")
import torch

if torch.cuda.is_available():
    lacking = f"cuda:{torch.cuda.device_count()}"
    refused_early(["--config", llama, "--tokens", ids, "--out", cap, "--device", lacking],
                  f"--device: {lacking}: torch sees {torch.cuda.device_count()} CUDA device(s), "
                  f"cuda:0..cuda:{torch.cuda.device_count() - 1}", "a CUDA device beyond the machine's")
else:
    refused_early(["--config", llama, "--tokens", ids, "--out", cap, "--device", "cuda"],
                  "--device: cuda: torch sees no CUDA device here (try --device cpu)",
                  "--device cuda on a machine without one")
p = subprocess.run([sys.executable, SCRIPT, "--config", llama, "--tokens", ids,
                    "--out", os.path.join(gone, "x.safetensors")],
                   capture_output=True, text=True, stdin=subprocess.DEVNULL)
expect(p.returncode == 2 and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr
       and p.stderr.startswith("capture_qkv: error: --out: "),
       f"the command line refuses an --out in a missing folder in one line: exit {p.returncode}, "
       f"stderr {p.stderr!r}")
import safetensors.torch
from safetensors import SafetensorError


def disk_full(*args, **kwargs):
    raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")


save_file = safetensors.torch.save_file
safetensors.torch.save_file = disk_full
try:
    code, err = capture("--config", llama, "--tokens", ids, "--out", cap)
except Exception as e:
    code, err = None, f"{type(e).__name__}: {e}"
finally:
    safetensors.torch.save_file = save_file
expect(code == 2 and err == f"capture_qkv: error: --out: {cap}: cannot write (SafetensorError: Error "
       "while serializing: I/O error: No space left on device (os error 28))\n",
       f"a failed write (a full disk) is one line: exit {code}, stderr {err!r}")

# --- a text file through a tokenizer (a word-level one made here: nothing downloaded) -------
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

words = ["the", "cat", "sat", "on", "mat", "[UNK]"]
tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
tok.pre_tokenizer = pre_tokenizers.Whitespace()
tok_dir = os.path.join(tmp, "tokenizer")
PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]").save_pretrained(tok_dir)
with open(text, "w") as f:
    f.write("the cat sat on the mat " * 8)
path = os.path.join(tmp, "text.safetensors")
code, err = capture("--config", llama, "--tokenizer", tok_dir, "--text", text, "--max-tokens", "30",
                    "--out", path)
expect(code == 0 and load_file(path)["q.0"].shape == (1, 4, 30, 16),
       f"a text file is tokenized and cropped to --max-tokens ({err.strip()})")

finish()
