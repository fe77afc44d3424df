"""tune --calib and --min-quality (issue 21).

On a calibration set with planted structure (local heads, sink heads, heads that reach 90
keys back; tests/cli/planted.py), `tune --min-quality mass_recall>=0.95` picks a
configuration that keeps the floor on every layer and head when checked by an
independent numpy reference, and that is faster than dense; on Gaussian inputs the same
command says that no sparse configuration meets the floor. Calibrated and Gaussian trials
are kept apart in the database, and a second run reuses every stored trial. Bad
calibration files are refused in one line, exit 2."""
import json
import os
import re
import sqlite3
import tempfile

import numpy as np
from safetensors.numpy import save_file

from clitest import expect, finish, run
import planted

tmp = tempfile.mkdtemp()
model = os.path.join(tmp, "config.json")
planted.model_config(model)
calib = os.path.join(tmp, "planted.safetensors")
tensors = planted.write_planted(calib, "planted/test-model")
out = os.path.join(tmp, "out")
db_path = os.path.join(out, "attntune.db")

# Exhaustive over dense and swa's kernel (w x sink x tiles), so that the outcome does not
# hang on a strategy's luck; --generic off keeps the space to one implementation.
TUNE = ["tune", "--retime", "off", "--model", model, "--variants", "dense,swa", "--generic", "off",
        "--strategy", "exhaustive", "--budget", "100", "--max-seconds", "0.03",
        "--min-quality", "mass_recall>=0.95", "--out", out]


def summary(stdout):
    m = re.search(r"attntune: (\d+) evaluations \((\d+) measured, (\d+) from the database", stdout)
    return tuple(int(x) for x in m.groups()) if m else None


def query(sql):
    con = sqlite3.connect(db_path)
    rows = con.execute(sql).fetchall()
    con.close()
    return rows


# --- the planted set: the tuner's pick keeps the floor on every layer and head ----------
p = run(*TUNE, "--calib", calib, check=0)
first = summary(p.stdout)
expect(first is not None and first[1] == first[0] > 0, f"the calibrated tune measured {first}")
expect("quality on " in p.stdout and "planted/test-model, layers 0,1, 512 tokens" in p.stdout,
       "the summary names the calibration set")
# The fastest candidate that keeps the floor; on a busy machine a window that covers the
# whole sequence (w >= 512: dense's work) can time faster than the sparse ones, and the
# summary then says so and that a sparse candidate keeps the floor too.
expect(re.search(r"  swa L=512: \S+ \S+ ms meets mass_recall>=0.95 (\(mass_recall mean|but attends "
                 r"all of dense's pairs \(a slower sparse candidate meets it too\))", p.stdout),
       "the summary says which swa configuration meets the floor:\n" + p.stdout[-600:])
expect("no sparse configuration" not in p.stdout, "some sparse configuration meets the floor")

with open(os.path.join(out, "attntune_config.json")) as f:
    doc = json.load(f)
calibrated = [e for e in doc["entries"] if e["calibration"] is not None]
expect(len(doc["calibrations"]) == 1 and doc["calibrations"][0]["tokens"] == 512,
       "the JSON lists the calibration set")
expect(all(e["floor"] == "mass_recall>=0.95" and "meets_floor" in e for e in calibrated),
       "every calibrated entry carries the floor and meets_floor")
# db records as bench --json has them: "inputs" the timing's (Gaussian), the calibration
# set apart (they said "inputs": "calibration set" and named no set).
records = [json.loads(line) for line in run("db", "records", "--db", db_path).stdout.splitlines()]
cal_records = [r for r in records if "calibration" in r]
expect(cal_records and all(r["inputs"] == "gaussian" for r in records) and
       all(r["calibration"].endswith("(planted/test-model, layers 0,1, 512 tokens)") for r in cal_records),
       f"db records: Gaussian inputs, the calibration set named: {[(r['inputs'], r.get('calibration')) for r in records][:3]}")
feasible = [e for e in calibrated if e["variant"] == "swa" and e["meets_floor"]]
chosen = min(feasible, key=lambda e: e["median_ms"])
dense = [e for e in calibrated if e["variant"] == "dense"]
w, sink = chosen["params"]["w"], chosen["params"]["sink"]
recalls = planted.layer_recalls(tensors, w, sink)
expect(all(min(heads) >= 0.95 for heads in recalls.values()),
       f"the pick w={w}, sink={sink} keeps mass_recall >= 0.95 on every layer and head by the "
       f"numpy reference: {recalls}")
sparse = [e for e in feasible if e["params"]["w"] < 512]
expect(sparse and all(min(min(h) for h in planted.layer_recalls(tensors, e["params"]["w"],
                                                                 e["params"]["sink"]).values()) >= 0.95
                      for e in sparse),
       f"sparse windows keep the floor: {[(e['params']['w'], e['params']['sink']) for e in sparse]}")
worst = min(min(h) for h in recalls.values())
expect(abs(chosen["mass_recall_worst"] - worst) < 1e-6,
       f"attntune's worst cell {chosen['mass_recall_worst']} is numpy's {worst}")
expect(len(dense) == 1 and chosen["median_ms"] < dense[0]["median_ms"],
       f"the pick is faster than dense ({chosen['median_ms']} ms against "
       f"{dense[0]['median_ms'] if dense else None} ms)")
# Every config that misses the floor on numpy's count is marked so, and the reverse.
for e in calibrated:
    if e["variant"] != "swa":
        continue
    numpy_worst = min(min(h) for h in planted.layer_recalls(tensors, e["params"]["w"],
                                                            e["params"]["sink"]).values())
    expect(e["meets_floor"] == (numpy_worst >= 0.95),
           f"w={e['params']['w']} sink={e['params']['sink']}: meets_floor {e['meets_floor']}, "
           f"numpy worst {numpy_worst:.4f}")
with open(os.path.join(out, "report.html")) as f:
    html = f.read()
expect('<table class="heatmap"' in html and "swa on calibration " in html,
       "the report has the heatmap and the calibrated time-quality chart")

# --- a second run reuses every stored trial -----------------------------------------------
p = run(*TUNE, "--calib", calib, check=0)
again = summary(p.stdout)
expect(again == (first[0], 0, first[0]), f"the re-run reused every trial: {again}")

# --- Gaussian inputs: the same command finds no sparse configuration -------------------------
p = run(*TUNE, "--seq-lens", "512", check=0)
expect("attntune: no sparse configuration meets mass_recall>=0.95 on gaussian inputs" in p.stdout,
       "on Gaussian inputs no sparse configuration meets the floor:\n" + p.stdout[-400:])
gaussian = summary(p.stdout)
expect(gaussian is not None and gaussian[1] == gaussian[0], f"Gaussian trials measured anew: {gaussian}")
by_source = dict(query("SELECT p.calib_id, count(*) FROM trial t JOIN problem p "
                       "ON p.id = t.problem_id GROUP BY p.calib_id"))
expect(by_source == {0: gaussian[0], 1: first[0]},
       f"calibrated and Gaussian trials are kept apart: {by_source}")
expect(query("SELECT calib_id FROM problem WHERE Lk = 512 ORDER BY calib_id") == [(0,), (1,)],
       "one problem per quality source at L=512")
p = run(*TUNE, "--seq-lens", "512", check=0)
expect(summary(p.stdout) == (gaussian[0], 0, gaussian[0]), "the Gaussian re-run reused every trial")
p = run(*TUNE, "--calib", calib, check=0)
expect(summary(p.stdout) == (first[0], 0, first[0]), "and the calibrated one still does")
cells = query("SELECT count(*) FROM trial_quality")[0][0]
expect(cells == first[0] * 2 * 4, f"each calibrated trial stored 2 layers x 4 heads ({cells})")

# --- bad calibration files: one line, exit 2 ----------------------------------------------------
def refused(args, expected, what):
    p = run(*args)
    line = f"attntune: error: {expected}\n"
    expect(p.returncode == 2 and p.stderr == line,
           f"{what}: exit {p.returncode}, stderr {p.stderr!r}, expected {line!r}")


def bad_file(name, tensors, metadata=None):
    path = os.path.join(tmp, name)
    save_file(tensors, path, metadata=metadata)
    return path


bad_out = os.path.join(tmp, "bad")
BASE = ["tune", "--model", model, "--variants", "swa", "--budget", "1", "--out", bad_out]
q, k, v = tensors["q.0"], tensors["k.0"], tensors["v.0"]
layer0 = {"q.0": q, "k.0": k, "v.0": v}

empty = os.path.join(tmp, "empty.safetensors")
open(empty, "wb").close()
refused(BASE + ["--calib", empty],
        f"--calib: {empty}: not a valid safetensors file (file is 0 bytes, shorter than the "
        "8-byte header length)", "an empty file")
path = bad_file("nothing.safetensors", {"x": np.zeros(3, np.float32)})
refused(BASE + ["--calib", path],
        f"--calib: {path}: no captured layers (expected F32 tensors q.<l> [B,Hq,L,d], k.<l> "
        "and v.<l> [B,Hkv,L,d] per captured layer l, as scripts/capture_qkv.py writes them)",
        "a file without captured layers")
path = bad_file("shapes.safetensors", {**layer0, "v.0": v[:, :, :500]})
refused(BASE + ["--calib", path],
        f"--calib: {path}: layer 0: q is [1,4,512,32], k [1,2,512,32], v [1,2,500,32] "
        "(expected [B,Hq,L,d] and [B,Hkv,L,d] with the same B, L and d)", "wrong shapes")
path = bad_file("rank.safetensors", {**layer0, "k.0": k[0]})
refused(BASE + ["--calib", path],
        f"--calib: {path}: tensor 'k.0' is F32 [2,512,32], expected F32 [B,H,L,d]", "a rank-3 tensor")
path = bad_file("missing.safetensors", {"q.0": q, "k.0": k})
refused(BASE + ["--calib", path],
        f"--calib: {path}: missing tensor 'v.0' (each captured layer l needs q.l, k.l and v.l)",
        "a missing tensor")
path = bad_file("heads.safetensors", {"q.0": q[:, :2], "k.0": k[:, :1], "v.0": v[:, :1]})
refused(BASE + ["--calib", path],
        f"--calib: {path}: layer 0 has 2 query and 1 KV heads, but the model {model} has 4 and 2",
        "heads that are not the model's")
path = bad_file("dim.safetensors", {"q.0": q[..., :16].copy(), "k.0": k[..., :16].copy(),
                                    "v.0": v[..., :16].copy()})
refused(BASE + ["--calib", path],
        f"--calib: {path}: layer 0 has head dim 16, but the model {model} has 32",
        "a head dim that is not the model's")
nan_q = q.copy()
nan_q[0, 1, 3, 5] = np.nan
path = bad_file("nan.safetensors", {**layer0, "q.0": nan_q})
refused(BASE + ["--calib", path],
        f"--calib: {path}: layer 0: tensor 'q' holds nan at element {(512 + 3) * 32 + 5} "
        "(attention needs finite inputs)", "a non-finite value")
path = bad_file("other.safetensors", layer0, {"model": "org/other", "model_type": "gemma2"})
refused(BASE + ["--calib", path],
        f"--calib: {path}: captured from 'org/other' (model_type gemma2), but the model {model} "
        "is model_type llama", "a file of another model (its model_type)")
path = bad_file("deeper.safetensors", layer0, {"model": "org/deeper", "num_hidden_layers": "32"})
refused(BASE + ["--calib", path],
        f"--calib: {path}: captured from 'org/deeper' (32 layers), but the model {model} has 2 "
        "layers", "a file of another model (its depth)")
path = bad_file("beyond.safetensors", {"q.5": q, "k.5": k, "v.5": v})
refused(BASE + ["--calib", path],
        f"--calib: {path}: layer 5 is beyond the 2 layers of the model {model}", "a layer beyond the model")
path = bad_file("name.safetensors", {**layer0, "q.first": q})
refused(BASE + ["--calib", path],
        f"--calib: {path}: tensor 'q.first' is not named q.<layer> (expected F32 tensors q.<l> "
        "[B,Hq,L,d], k.<l> and v.<l> [B,Hkv,L,d] per captured layer l, as "
        "scripts/capture_qkv.py writes them)", "a tensor name without a layer")
one_layer = bad_file("one.safetensors", layer0)
refused(BASE + ["--calib", f"{calib},{one_layer}"],
        f"--calib: {one_layer}: holds layers 0, but {calib} holds 0,1 (every file of a "
        "calibration set holds the same layers)", "files with other layers")
missing = os.path.join(tmp, "absent.safetensors")
refused(BASE + ["--calib", missing],
        f"--calib: {missing}: cannot open (No such file or directory)", "a missing file")
refused(BASE + ["--calib", calib, "--seq-lens", "1024"],
        "--seq-lens: 1024 is longer than the calibration set's 512 tokens (quality is measured "
        "on the first L captured tokens: tune at most 512, or capture a longer text)",
        "a length beyond the capture")
refused(BASE + ["--calib", calib, "--min-quality", "recall>=0.9"],
        "--min-quality: 'recall>=0.9' is not mass_recall>=X or rel_err<=X", "a bad floor")
refused(BASE + ["--calib", calib, "--min-quality", ""],
        "--min-quality: empty (expected mass_recall>=X and/or rel_err<=Y)", "an empty floor")
expect(not os.path.exists(os.path.join(bad_out, "attntune.db")), "no refused tune stored anything")

# A crop: L=256 of the 512 captured tokens is measured on the first 256.
p = run("tune", "--model", model, "--calib", calib, "--seq-lens", "256", "--variants", "swa",
        "--generic", "off", "--budget", "2", "--max-seconds", "0.02", "--out", out, check=0)
con = sqlite3.connect(db_path)
row = con.execute("SELECT c.params_json, m.value FROM trial t JOIN problem p ON p.id = t.problem_id "
                  "JOIN config c ON c.id = t.config_id JOIN metric m ON m.trial_id = t.id "
                  "WHERE p.Lk = 256 AND p.calib_id = 1 AND m.name = 'mass_recall_worst' "
                  "AND t.status = 'ok' LIMIT 1").fetchone()
con.close()
params = json.loads(row[0])
cropped = {n: t[:, :, :256] for n, t in tensors.items()}
numpy_worst = min(min(h) for h in planted.layer_recalls(cropped, params["w"], params["sink"]).values())
expect(abs(row[1] - numpy_worst) < 1e-6,
       f"at L=256 quality is that of the first 256 tokens ({row[1]} against numpy's {numpy_worst})")

# --- bench --calib: one candidate's quality on the capture, cropped to the shape's Lk ----------
p = run("bench", "--variant", "swa", "--params", "w=128,sink=0", "--shape", "B=1,Hq=4,Hkv=2,L=384,d=32",
        "--calib", calib, "--max-seconds", "0.02", "--json", check=0)
record = json.loads(p.stdout)
cropped = {n: t[:, :, :384] for n, t in tensors.items()}
numpy_recalls = planted.layer_recalls(cropped, 128, 0)
numpy_worst = min(min(h) for h in numpy_recalls.values())
layer = min(numpy_recalls, key=lambda l: min(numpy_recalls[l]))
expect(abs(record["mass_recall_worst"] - numpy_worst) < 1e-6 and
       record["mass_recall_worst_layer"] == layer and
       record["mass_recall_worst_head"] == int(np.argmin(numpy_recalls[layer])),
       f"bench --calib: worst {record['mass_recall_worst']} at layer "
       f"{record['mass_recall_worst_layer']}, numpy {numpy_worst} at layer {layer}")
expect(record["calibration"].endswith("(planted/test-model, layers 0,1, 512 tokens)"),
       "bench names the calibration set")
refused(["bench", "--variant", "swa", "--params", "w=128,sink=0", "--shape", "B=1,Hq=4,Hkv=2,L=384,d=16",
         "--calib", calib],
        f"--calib: {calib}: layer 0 has head dim 32, but the model given by --shape has 16",
        "bench: a capture of another head dim")
# A capture is causal attention: causal=0 reported the causal quality beside a non-causal time.
refused(["bench", "--variant", "swa", "--params", "w=128,sink=0", "--shape",
         "B=1,Hq=4,Hkv=2,L=384,d=32,causal=0", "--calib", calib],
        "--calib: a capture is causal attention; --shape causal=0 cannot be measured on it "
        "(drop causal=0, or --calib)", "bench: causal=0 with a capture")

# --- allocate --min-quality: the window is the smallest that keeps the floor ---------------
alloc = os.path.join(tmp, "alloc")
p = run("allocate", "--model", model, "--calib", calib, "--rho", "0.5", "--min-quality",
        "mass_recall>=0.95", "--context", "512", "--no-measure", "--out", alloc, check=0)
with open(os.path.join(alloc, "attntune_config.json")) as f:
    windows = json.load(f)["allocations"][0]["kv_head_windows"]
chosen_w = max(max(row) for row in windows)
expect("the smallest of 16..256 (powers of 2) that keeps mass_recall>=0.95 on every SWA KV head"
       in p.stdout, "allocate says how its window was chosen")


def kv_head_mass(layer, kv_head, w):
    """A KV head's mass kept under swa(w) (no sinks): the mean over its query heads."""
    heads = planted.layer_recalls(tensors, w, 0)[layer]
    return (heads[2 * kv_head] + heads[2 * kv_head + 1]) / 2


swa_heads = [(l, h) for l, row in enumerate(windows) for h, w_lh in enumerate(row) if w_lh > 0]
expect(len(swa_heads) == 2 and all(kv_head_mass(l, h, chosen_w) >= 0.95 for l, h in swa_heads),
       f"every SWA KV head {swa_heads} keeps the floor at w={chosen_w} (numpy)")
expect(any(kv_head_mass(l, h, chosen_w // 2) < 0.95 for l, h in swa_heads),
       f"and at w={chosen_w // 2} one does not: the window is the smallest")
refused(["allocate", "--model", model, "--rho", "0.5", "--min-quality", "mass_recall>=0.95",
         "--out", alloc],
        "--min-quality: needs --calib (the floor is kept on the model's captured attention)",
        "allocate: a floor without a calibration set")
refused(["allocate", "--model", model, "--calib", calib, "--rho", "1", "--min-quality",
         "mass_recall>=0.9999", "--context", "512", "--no-measure", "--out", alloc],
        "--min-quality: no window up to 256 keeps mass_recall>=0.9999 on every SWA KV head of the "
        "allocation (lower --rho, or the floor)", "allocate: a floor no window keeps")

finish()
