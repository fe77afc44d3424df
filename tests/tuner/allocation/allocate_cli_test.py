"""attntune allocate end to end: outputs, exact rho, import round trip, one-line errors."""
import json
import os
import re
import sqlite3
import tempfile

from clitest import run, expect, finish, FIXTURES

tmp = tempfile.mkdtemp()
tiny = os.path.join(FIXTURES, "models/tiny/config.json")
gemma3 = os.path.join(FIXTURES, "models/gemma-3-1b-it/config.json")


def load(out):
    with open(os.path.join(out, "attntune_config.json")) as f:
        return json.load(f)["allocations"][0]


def trials(db):
    """(status, count) of every trial status stored in `db`."""
    with sqlite3.connect(db) as c:
        return sorted(c.execute("SELECT status, COUNT(*) FROM trial GROUP BY status").fetchall())


# A config.json with its own layout; consa, head-wise, measured at a small context.
out = os.path.join(tmp, "gemma3")
p = run("allocate", "--model", gemma3, "--rho", "0.5", "--granularity", "layer", "--strategy",
        "consa", "--context", "1024", "--calib-len", "64", "--max-seconds", "0.2", "--out", out, check=0)
a = load(out)
expect(a["rho"] == 0.5 and a["transformers"]["layer_types"].count("sliding_attention") == 13,
       f"layer-wise consa: 13 of 26 layers slide ({a['rho']})")
expect(a["sliding_window"] == 512, "the window defaults to the config's sliding_window")
expect(a["cost"]["prefill_ms"] > 0 and a["cost"]["kv_bytes"] > 0, "costs are measured")
expect(any(pt["on_front"] for pt in a["sweep"]), "the sweep marks a front")
t = a["tuned"]
expect(t is not None and t["Br"] in (16, 32, 64, 128) and t["Bc"] in (32, 64, 128, 256)
       and t["w"] == 512 and t["prefill_ms"] > 0 and t["evaluations"] == 6,
       f"the default --tune-budget 6 tunes the hybrid tiles from the grid ({t})")
expect("tuned tiles: Br" in p.stdout, "the summary names the tuned tiles")
# Its measurements are trials in <out>/attntune.db: two layer patterns (0 or 1 SWA KV head)
# at the prefill and at a decode step, and the tile search's 6 points (the defaults' trial,
# should the search draw them, answered from the database); a re-run reuses them all.
db = os.path.join(out, "attntune.db")
stored = trials(db)
expect(len(stored) == 1 and stored[0][0] == "ok" and 4 <= stored[0][1] <= 4 + 6
       and f"({stored[0][1]} measured, {10 - stored[0][1]} from the database, 0 failed)" in p.stdout,
       f"the measurements are stored as ok trials ({stored}; {p.stdout!r})")
p2 = run("allocate", "--model", gemma3, "--rho", "0.5", "--granularity", "layer", "--strategy",
         "consa", "--context", "1024", "--calib-len", "64", "--max-seconds", "0.2", "--out", out,
         check=0)
t2 = load(out)["tuned"]
expect(trials(db) == stored and "(0 measured, 10 from the database, 0 failed)" in p2.stdout
       and (t2["Br"], t2["Bc"], t2["prefill_ms"]) == (t["Br"], t["Bc"], t["prefill_ms"]),
       f"a re-run measures nothing and chooses the same tiles ({p2.stdout!r})")
with open(os.path.join(out, "full_attention_heads.tsv")) as f:
    rows = [r.split("\t") for r in f.read().splitlines()]
expect(len(rows) == 26 and all(len(r) == 1 for r in rows), "TSV: one row per layer, one column per KV head")
with open(os.path.join(out, "attntune_allocation.h")) as f:
    header = f.read()
expect("constexpr int32_t kWindows[kLayers][kKvHeads]" in header, "header has the window table")
expect(f"constexpr int kTileBr = {t['Br']};" in header and f"constexpr int kTileBc = {t['Bc']};" in header,
       "header has the tuned tiles")
with open(os.path.join(out, "allocation.html")) as f:
    html = f.read()
expect(html.count('<td class="c"') == 26 and "Pareto front" in html,
       "allocation.html: one heatmap cell per (layer, KV head) and the sweep")

# Head-wise on tiny: exact per-layer share and a per-KV-head map; import it back.
out2 = os.path.join(tmp, "tiny")
run("allocate", "--model", tiny, "--rho", "0.5", "--granularity", "head", "--strategy", "greedy",
    "--context", "256", "--window", "32", "--calib-len", "64", "--no-measure", "--out", out2, check=0)
b = load(out2)
expect(b["swa_share_per_layer"] == [0.5, 0.5] and "kv_head_windows" in b,
       "head-wise: half of each layer's KV heads slide, per-head map written")
expect(b["tuned"] is None, "--no-measure: tiles are not tuned")
out3 = os.path.join(tmp, "import")
run("allocate", "--model", tiny, "--strategy", "import", "--import",
    os.path.join(out2, "full_attention_heads.tsv"), "--context", "256", "--window", "32",
    "--calib-len", "64", "--no-measure", "--out", out3, check=0)
with open(os.path.join(out2, "full_attention_heads.tsv")) as f1, \
        open(os.path.join(out3, "full_attention_heads.tsv")) as f2:
    expect(f1.read() == f2.read(), "import of an exported TSV reproduces it")

# The JSON has tune's schema (attntune_config.json of `tune`), the allocation in "allocations".
with open(os.path.join(out2, "attntune_config.json")) as f:
    doc = json.load(f)
expect(doc["schema"] == 1 and doc["tool"] == "attntune" and isinstance(doc["entries"], list)
       and isinstance(doc["devices"], list) and len(doc["allocations"]) == 1,
       f"attntune_config.json: tune's schema with one allocation ({sorted(doc)})")
expect(b["transformers"]["sliding_window"] == 32
       and b["transformers"]["layer_types"] == ["full_attention", "full_attention"],
       "the allocation in transformers' form: sliding_window and layer_types")

# --db puts the trials elsewhere.
out4 = os.path.join(tmp, "db")
custom = os.path.join(tmp, "custom.db")
run("allocate", "--model", tiny, "--rho", "0.5", "--context", "256", "--window", "32",
    "--calib-len", "64", "--max-seconds", "0.1", "--tune-budget", "0", "--db", custom,
    "--out", out4, check=0)
expect(trials(custom) == [("ok", 6)] and not os.path.exists(os.path.join(out4, "attntune.db")),
       f"--db FILE holds the trials ({trials(custom)}, {os.listdir(out4)})")

# Without --out, allocate writes into attntune_out, the folder `tune` uses.
default_cwd = os.path.join(tmp, "cwd")
os.makedirs(default_cwd)
os.chdir(default_cwd)
run("allocate", "--model", tiny, "--rho", "0.5", "--context", "256", "--window", "32",
    "--calib-len", "64", "--no-measure", check=0)
expect(sorted(os.listdir(default_cwd)) == ["attntune_out"]
       and os.path.exists(os.path.join(default_cwd, "attntune_out", "attntune_config.json")),
       f"the default output folder is attntune_out ({os.listdir(default_cwd)})")
os.chdir(tmp)


def expect_error(args, line, pattern=None):
    """Exit 2 with the one line `line` (or one line matching the regular expression
    `pattern`), within 2 minutes (a hang fails the test)."""
    p = run(*args, timeout=120)
    err = p.stderr.strip().splitlines()
    ok = (err == [line]) if pattern is None else (len(err) == 1 and re.fullmatch(pattern, err[0]))
    expect(p.returncode == 2 and ok,
           f"attntune {' '.join(args)} -> {line or pattern!r}\n  got exit {p.returncode}, stderr {p.stderr!r}")


# Without a budget each KV head is taken as the file has it: that is head-global, and the
# outputs say so (they said "layer" or "head" for a per-head mix); a layer or an equal
# count per layer needs a budget.
mask = os.path.join(tmp, "mask.json")
with open(mask, "w") as f:
    json.dump({"format": "attntune-consa-mask", "version": 1, "mask": [[0.2, 0.9], [0.5, 0.4]]}, f)
out4 = os.path.join(tmp, "import-mask")
run("allocate", "--model", tiny, "--strategy", "import", "--import", mask, "--context", "256",
    "--window", "32", "--no-measure", "--out", out4, check=0)
m = load(out4)
expect(m["granularity"] == "head-global" and m["kv_head_windows"] == [[32, 0], [0, 32]],
       f"an import without a budget: per head, head-global ({m['granularity']}, {m['kv_head_windows']})")
for g in ("layer", "head"):
    expect_error(["allocate", "--model", tiny, "--strategy", "import", "--import", mask,
                  "--granularity", g, "--context", "256", "--no-measure", "--out", tmp],
                 f"attntune: error: --granularity: {g} needs a budget with --strategy import "
                 "(without --rho, --kv-bytes or --latency-ms each KV head is taken as the file "
                 "has it: head-global)")
expect_error(["allocate", "--model", tiny, "--rho", "1.5", "--out", tmp],
             "attntune: error: --rho: '1.5' is not a number from 0 to 1")
expect_error(["allocate", "--model", tiny, "--rho=-0.5", "--out", tmp],
             "attntune: error: --rho: '-0.5' is not a number from 0 to 1")
expect_error(["allocate", "--model", tiny, "--out", tmp],
             "attntune: error: --rho: missing (give --rho R, --latency-ms T or --kv-bytes N)")
# Budgets that are not budgets are refused naming their own flag (they said "--rho:
# missing", or with --rho were ignored).
expect_error(["allocate", "--model", tiny, "--kv-bytes", "-1", "--out", tmp],
             "attntune: error: --kv-bytes: '-1' is not a non-negative integer")
expect_error(["allocate", "--model", tiny, "--rho", "0.5", "--kv-bytes", "-1", "--out", tmp],
             "attntune: error: --kv-bytes: '-1' is not a non-negative integer")
for value in ["nan", "-3", "0", "inf"]:
    expect_error(["allocate", "--model", tiny, "--latency-ms", value, "--out", tmp],
                 f"attntune: error: --latency-ms: '{value}' is not a positive number")
# --context: at most 2^24 tokens, answered at once (a per-token loop never ended at 1e14).
QWEN = ["allocate", "--model", "qwen3-1.7b", "--rho", "0.5", "--granularity", "layer",
        "--strategy", "rule"]
expect_error(QWEN + ["--context", "99999999999999", "--no-measure", "--out", tmp],
             "attntune: error: --context: 99999999999999 is longer than attntune takes (16777216 tokens)")
p = run(*(QWEN + ["--context", "16777216", "--no-measure", "--out", os.path.join(tmp, "long")]),
        timeout=120, check=0)
# 28 layers x 8 KV heads x 512 bytes a token; 14 layers dense (2^24 tokens), 14 SWA (2^22).
expect("KV 1202590842880 bytes at 16777216 tokens" in p.stdout,
       f"--context 16777216 --no-measure counts pairs and bytes ({p.stdout.splitlines()[3:4]})")
# Measuring: the layers' inputs and fp64 references checked against this machine's memory
# before anything is allocated (bad_alloc before).
expect_error(QWEN + ["--context", "16777216", "--out", tmp], None,
             # 1282 GiB: q, k, v and o in fp32 (384), 3 references of q in fp64 (768), the
             # dense rows' log-sum-exp (2), the decode step's own k and v (128).
             r"attntune: error: --context: B=1,Hq=16,Hkv=8,L=16777216,d=128 needs 1282\.0 GiB for "
             r"its inputs and outputs and 3 fp64 references \(dense and each layer pattern\), "
             r"more than this machine's [0-9.]+ GiB of memory")
# Pair sums beyond 2^62 (1024 layers of 1024 heads at 2^24 tokens).
big = os.path.join(tmp, "big.json")
with open(big, "w") as f:
    json.dump({"num_hidden_layers": 1024, "num_attention_heads": 1024, "num_key_value_heads": 8,
               "head_dim": 64}, f)
expect_error(["allocate", "--model", big, "--rho", "0.5", "--context", "16777216",
              "--no-measure", "--out", tmp],
             f"attntune: error: --context: 16777216 tokens over {big}'s 1024 layers of 1024 "
             "query heads make 1.48e+20 attended pairs, more than attntune counts (2^62)")
expect_error(["allocate", "--model", tiny, "--rho", "0.5", "--context", "256", "--sink",
              "9223372036854775807", "--no-measure", "--out", tmp],
             "attntune: error: --sink: 9223372036854775807 is more than --context 256")
expect_error(["allocate", "--model", tiny, "--rho", "0.5", "--calib-len", "16777217",
              "--no-measure", "--out", tmp],
             "attntune: error: --calib-len: 16777217 is longer than attntune takes (16777216 tokens)")
expect_error(["allocate", "--model", tiny, "--rho", "0.5", "--tune-budget", "-1", "--out", tmp],
             "attntune: error: --tune-budget: '-1' is not a non-negative integer")
# Numbers as decimal digits, the whole text, in range: CLI11's conversion took '' as 0
# ("--rho ''" ran an all-full allocation, "--window ''" the default window), took
# "--window 0" for "unset" (the default window, past --min-quality's refusal of --window)
# and saturated 99999999999999999999 to 2^63 - 1 (stored as the budget).
for flag, value, what in (("--rho", "", "a number from 0 to 1"),
                          ("--rho", "nan", "a number from 0 to 1"),
                          ("--window", "", "a positive integer"),
                          ("--window", "0", "a positive integer"),
                          ("--window", "0x10", "a positive integer"),
                          ("--tune-budget", "", "a non-negative integer"),
                          ("--sink", "-1", "a non-negative integer"),
                          ("--context", "", "a positive integer"),
                          ("--calib-len", "1e3", "a positive integer"),
                          ("--kv-bytes", "99999999999999999999", "a non-negative integer")):
    args = ["allocate", "--model", tiny, "--no-measure", "--context", "256", "--out", tmp]
    args += [] if flag == "--rho" else ["--rho", "0.5"]
    expect_error(args + [flag, value], f"attntune: error: {flag}: '{value}' is not {what}")
# A sink that, with the window scaled to the calibration length, covers every calibration
# token: every head's loss was 0 (qwen3-1.7b at rho 1: 1.4e-31), and the allocation rested
# on it.
expect_error(["allocate", "--model", "qwen3-1.7b", "--rho", "1", "--context", "4096", "--window",
              "512", "--sink", "256", "--no-measure", "--out", tmp],
             "attntune: error: --calib-len: the SWA set (the window's 32 tokens at this length plus "
             "--sink 256) covers all 256 calibration tokens, so no head would lose anything; "
             "calibrate on more than 288 tokens or give a smaller --sink")
# A context so short that a quarter of it is no window: the outputs said "window 0" (full
# attention, by the hybrid variant's reading) for the SWA heads, exit 0.
expect_error(["allocate", "--model", tiny, "--rho", "0.5", "--context", "3", "--no-measure",
              "--out", tmp],
             "attntune: error: --context: 3 leaves a window of 0 (a quarter of the context); give --window")
expect_error(["allocate", "--model", tiny, "--rho", "0.5", "--granularity", "row", "--out", tmp],
             "attntune: error: --granularity: 'row' is not a granularity (expected layer, head or head-global)")
expect_error(["allocate", "--model", tiny, "--no-measure", "--rho", "0.5", "--import", "/nonexistent.tsv"],
             "attntune: error: --import: read by --strategy import only (this run's is greedy)")
expect_error(["allocate", "--model", tiny, "--rho", "0.5", "--strategy", "import", "--import",
              os.path.join(out, "full_attention_heads.tsv"), "--no-measure", "--out", tmp],
             f"attntune: error: --import: {os.path.join(out, 'full_attention_heads.tsv')} has 26 layers x 1 KV heads, but {tiny} has 2 x 2")
finish()
