"""attntune tune end to end on a tiny model: the four outputs, the re-run that reuses
every stored trial, and a run killed with SIGKILL that resumes losing at most one trial."""
import json
import os
import re
import signal
import sqlite3
import subprocess
import tempfile
import time

from clitest import ATTNTUNE, FIXTURES, run, expect, fail, finish

tiny = os.path.join(FIXTURES, "models/tiny/config.json")
tmp = tempfile.mkdtemp()
out = os.path.join(tmp, "out")
args = ["tune", "--retime", "off", "--model", tiny, "--variants", "dense,swa", "--seq-lens", "96,700",
        "--budget", "4", "--strategy", "random", "--seed", "3", "--max-seconds", "0.2", "--out", out]

t0 = time.monotonic()
p = run(*args, check=0)
first = time.monotonic() - t0
print(p.stdout, p.stderr)
db_path = os.path.join(out, "attntune.db")
for name in ["attntune.db", "attntune_config.h", "attntune_config.json", "report.html"]:
    expect(os.path.getsize(os.path.join(out, name)) > 0, f"tune wrote {name}")
    expect(os.path.join(out, name) in p.stdout or name == "attntune.db" and db_path in p.stdout,
           f"tune says where {name} is")
expect("16 evaluations (16 measured, 0 from the database" in p.stdout, "first run measured all 16")


def trials(path):
    con = sqlite3.connect(path)
    rows = con.execute("SELECT problem_id, config_id, status FROM trial").fetchall()
    con.close()
    return rows


rows = trials(db_path)
expect(len(rows) == 16 and all(r[2] == "ok" for r in rows), f"16 ok trials stored: {rows}")

# The header compiles on its own and knows the tuned shapes.
hdr = os.path.join(out, "attntune_config.h")
c = subprocess.run(["g++", "-std=c++17", "-Wall", "-Wextra", "-Werror", "-fsyntax-only", hdr],
                   capture_output=True, text=True)
expect(c.returncode == 0, f"attntune_config.h compiles alone: {c.stderr}")
text = open(hdr).read()
expect("attntune" in text and db_path in text, "header carries provenance (tool, database)")

cfg = json.load(open(os.path.join(out, "attntune_config.json")))
expect(cfg.get("schema") == 1, "JSON has schema 1")
variants = {e["variant"] for e in cfg["entries"]}
expect(variants == {"dense", "swa"}, f"JSON entries cover dense and swa: {variants}")
html = open(os.path.join(out, "report.html")).read()
expect("Chart.js" in html and "<table" in html, "report has Chart.js and a table")
phases = {e.get("phase") for e in cfg["entries"]}
expect(phases == {"prefill"}, f"the default tune's entries are prefill: {phases}")

# Same arguments again: every trial comes from the database, nothing new is stored.
t0 = time.monotonic()
p = run(*args, check=0)
second = time.monotonic() - t0
expect("16 evaluations (0 measured, 16 from the database" in p.stdout, f"re-run reused all: {p.stdout}")
expect(len(trials(db_path)) == 16, "re-run stored no duplicates")
expect(first >= 10 * second, f"re-run at least 10x faster: first {first:.2f}s, second {second:.2f}s")

# --phase decode into the same database: one query row per head against L keys (Lq = 1),
# dma_decode every step (Lq = Lk); stored as decode problems next to the prefill ones.
dargs = ["tune", "--retime", "off", "--model", tiny, "--phase", "decode", "--variants", "dense,dma_decode",
         "--seq-lens", "96,700", "--budget", "2", "--strategy", "random", "--seed", "3",
         "--max-seconds", "0.2", "--out", out]
p = run(*dargs, check=0)
expect("8 evaluations (8 measured, 0 from the database, 0 failed)" in p.stdout,
       f"decode tune measured 8, none failed: {p.stdout}")
expect("dense decode L=96" in p.stderr, f"progress names the decode problems: {p.stderr}")
con = sqlite3.connect(db_path)
decode_rows = con.execute(
    "SELECT DISTINCT c.variant, p.Lq, p.Lk FROM trial t JOIN problem p ON p.id = t.problem_id "
    "JOIN config c ON c.id = t.config_id WHERE p.phase = 'decode' ORDER BY 1, 3").fetchall()
phase_counts = dict(con.execute(
    "SELECT p.phase, COUNT(*) FROM trial t JOIN problem p ON p.id = t.problem_id "
    "GROUP BY p.phase").fetchall())
args_json = json.loads(con.execute("SELECT args_json FROM run ORDER BY id DESC LIMIT 1").fetchone()[0])
con.close()
expect(decode_rows == [("dense", 1, 96), ("dense", 1, 700), ("dma_decode", 96, 96),
                       ("dma_decode", 700, 700)], f"decode problems stored: {decode_rows}")
expect(phase_counts == {"prefill": 16, "decode": 8}, f"trials per phase: {phase_counts}")
expect(args_json.get("phase") == "decode", f"the run records its phase: {args_json}")
cfg = json.load(open(os.path.join(out, "attntune_config.json")))
keys = {(e["variant"], e["phase"], e["seq_len"]) for e in cfg["entries"]}
expect({("dense", "prefill", 96), ("dense", "decode", 96), ("dma_decode", "decode", 700)} <= keys,
       f"the JSON holds dense's prefill and decode entries apart: {sorted(keys)}")
hdr_text = open(hdr).read()
expect('"dense", "decode"' in hdr_text and '"dense", "prefill"' in hdr_text,
       "the header holds both phases")
c = subprocess.run(["g++", "-std=c++17", "-Wall", "-Wextra", "-Werror", "-fsyntax-only", hdr],
                   capture_output=True, text=True)
expect(c.returncode == 0, f"attntune_config.h with decode entries compiles alone: {c.stderr}")
html = open(os.path.join(out, "report.html")).read()
expect("<td>decode</td>" in html, "the report's trial table shows the phase")

# Kill mid-tune with SIGKILL, then resume.
out2 = os.path.join(tmp, "killed")
db2 = os.path.join(out2, "attntune.db")
kargs = ["tune", "--retime", "off", "--model", tiny, "--variants", "dense,swa", "--seq-lens", "700,900",
         "--budget", "4", "--seed", "5", "--max-seconds", "0.3", "--out", out2]
proc = subprocess.Popen([ATTNTUNE, *kargs], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                        stdin=subprocess.DEVNULL)
stored = 0
deadline = time.monotonic() + 300
while time.monotonic() < deadline and proc.poll() is None:
    try:
        stored = len(trials(db2)) if os.path.exists(db2) else 0
    except sqlite3.Error:
        stored = 0
    if stored >= 3:
        proc.send_signal(signal.SIGKILL)
        break
    time.sleep(0.02)
proc.wait()
expect(proc.returncode == -signal.SIGKILL, f"tune was killed mid-run (returncode {proc.returncode})")
before = len(trials(db2))
expect(3 <= before < 16, f"killed run kept its committed trials ({before})")
p = run(*kargs, check=0)
after = trials(db2)
keys = {(r[0], r[1]) for r in after}
expect(len(after) == 16 and len(keys) == 16, f"resume completed with no duplicates ({len(after)} rows)")
expect(f"({16 - before} measured, {before} from the database" in p.stdout,
       f"resume reused the {before} stored trials: {p.stdout}")
# --time-budget alone: the searches stop on time, not on a count. Every problem gets at
# least one evaluation, the progress shows no count to reach, and the run records its
# budgets. (The bound on the wall time is loose: this checks that it stops, not speed.)
tout = os.path.join(tmp, "timed")
targs = ["tune", "--retime", "off", "--model", tiny, "--variants", "dense,swa", "--seq-lens", "96,700",
         "--time-budget", "2s", "--strategy", "random", "--seed", "3", "--max-seconds", "0.2",
         "--out", tout]
t0 = time.monotonic()
p = run(*targs, check=0)
took = time.monotonic() - t0
expect(took < 30, f"a 2 s time budget stopped the tune ({took:.1f} s with start-up and outputs)")
expect("eval 1  " in p.stderr and "eval 1/" not in p.stderr,
       f"progress without a count to reach: {p.stderr[:300]}")
con = sqlite3.connect(os.path.join(tout, "attntune.db"))
per_problem = con.execute("SELECT t.problem_id, c.variant, COUNT(*) FROM trial t "
                          "JOIN config c ON c.id = t.config_id "
                          "GROUP BY t.problem_id, c.variant").fetchall()
targs_json = json.loads(con.execute("SELECT args_json FROM run").fetchone()[0])
con.close()
expect(len(per_problem) == 4 and all(n >= 1 for _, _, n in per_problem),
       f"each (variant, length) has at least one trial: {per_problem}")
expect(targs_json.get("time_budget_s") == 2 and targs_json.get("budget") == 0,
       f"the run records its budgets: {targs_json}")
# --retime on (the default): each problem's fastest is timed again beside the untuned
# default; the JSON says who won by how much; a re-run re-times nothing; db records marks
# each entry's own record "tuned".
rout = os.path.join(tmp, "retime")
rargs = ["tune", "--model", tiny, "--variants", "dense,swa", "--params", "w=64,sink=0",
         "--seq-lens", "96", "--budget", "4", "--strategy", "random", "--seed", "3",
         "--max-seconds", "0.05", "--out", rout]
p = run(*rargs, check=0)
cfg = json.load(open(os.path.join(rout, "attntune_config.json")))
# A configuration faster than the default in the search is re-timed (reported, counted);
# else the default itself is the entry.
retimed = p.stderr.count("re-timed: ")
expect((retimed > 0 and f"{retimed} fastest configurations re-timed against the default" in p.stdout)
       or all(e["default"] and e["default"]["tunables"] == e["tunables"] for e in cfg["entries"]),
       f"re-timed and counted, or the default is every entry: {p.stdout} {p.stderr[-400:]}")
for e in cfg["entries"]:
    d = e.get("default")
    expect(d is not None and d["implementation"] == "tiled" and d["margin"] >= 1.0,
           f"{e['variant']}: the entry is no slower than the default it was re-timed against: {d}")
    expect(e["implementation"] in e["implementations"], f"{e['variant']}: every implementation's best")
expect({e["params"].get("w") for e in cfg["entries"] if e["variant"] == "swa"} == {64},
       "--params w=64: swa searched at w=64 only")
p2 = run(*rargs, check=0)
expect("0 measured" in p2.stdout and "re-timed: " not in p2.stderr,
       f"a re-run re-times nothing: {p2.stdout} {p2.stderr[-300:]}")
rec = run("db", "records", "--db", os.path.join(rout, "attntune.db"))
recs = [json.loads(line) for line in rec.stdout.splitlines()]
expect(sum(r["tuned"] for r in recs) == len(cfg["entries"]) and all("median_ms" in r for r in recs),
       f"db records: one tuned record per entry: {[(r['variant'], r['implementation'], r['tuned']) for r in recs]}")
# What a stored trial does not keep is left out, not written as 0 (a select_ms of 0.0
# claimed the selection cost nothing; on the CPU no trial stores one).
expect(all("kernels" not in r and "peak_rss_bytes" not in r and "select_ms" not in r for r in recs),
       f"db records: no made-up kernels, peak memory or selection time: {sorted(recs[0])}")

# A second model (other heads) tuned into the same database: its outputs hold its own
# trials only (every time in them is one of its trials); emit and report refuse the mixed
# database in one line until --model (or --dtype, --batch) picks one; db records keeps both.
wide = os.path.join(tmp, "wide.json")
with open(wide, "w") as f:
    json.dump({"model_type": "qwen3", "hidden_size": 256, "num_hidden_layers": 2,
               "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 32}, f)
wout = os.path.join(tmp, "wide-out")
rdb = os.path.join(rout, "attntune.db")
run("tune", "--model", wide, "--variants", "dense", "--seq-lens", "96", "--budget", "2",
    "--strategy", "random", "--seed", "3", "--max-seconds", "0.05", "--db", rdb, "--out", wout, check=0)
con = sqlite3.connect(rdb)
own = {r[0] for r in con.execute(
    "SELECT t.median_ms FROM trial t JOIN problem p ON p.id = t.problem_id "
    "WHERE t.status = 'ok' AND p.Hq = 8")}
con.close()
wcfg = json.load(open(os.path.join(wout, "attntune_config.json")))
times = [e["median_ms"] for e in wcfg["entries"]] + \
        [ms for e in wcfg["entries"] for ms in e["implementations"].values()]
expect(len(wcfg["entries"]) == 1 and own and all(ms in own for ms in times),
       f"the second model's config holds its own trials only: {times} of {sorted(own)}")
for cmd in (["emit", "--out", os.path.join(tmp, "mixed")], ["report", "--out", os.path.join(tmp, "mixed.html")]):
    p = run(*cmd, "--db", rdb, check=2)
    expect(p.stderr.count("\n") == 1 and "2 problem geometries" in p.stderr and "Hq=4" in p.stderr
           and "Hq=8" in p.stderr and "--model" in p.stderr,
           f"{cmd[0]} refuses a database of two geometries in one line: {p.stderr}")
p = run("emit", "--db", rdb, "--model", tiny, "--out", os.path.join(tmp, "tiny-again"), check=0)
tcfg = json.load(open(os.path.join(tmp, "tiny-again", "attntune_config.json")))
expect(len(tcfg["entries"]) == len(cfg["entries"]), "emit --model picks the first model's entries")
# A geometry no trial has: one line, and the folder's outputs kept (they were overwritten
# with outputs of no entry, exit 0).
before = open(os.path.join(tmp, "tiny-again", "attntune_config.json")).read()
p = run("emit", "--db", rdb, "--dtype", "fp16", "--out", os.path.join(tmp, "tiny-again"), check=2)
expect(p.stderr.count("\n") == 1 and "no trial of the geometry chosen" in p.stderr
       and "Hq=4" in p.stderr and "Hq=8" in p.stderr and
       open(os.path.join(tmp, "tiny-again", "attntune_config.json")).read() == before,
       f"emit of a geometry no trial has is refused, the outputs kept: {p.stderr}")
p = run("emit", "--db", rdb, "--dtype", "fp64", "--out", os.path.join(tmp, "x"), check=2)
expect(p.stderr.startswith("attntune: error: --dtype: 'fp64'"), f"a bad --dtype in one line: {p.stderr}")
rec = run("db", "records", "--db", rdb, check=0)
heads = {re.search(r"Hq=(\d+)", json.loads(line)["shape"]).group(1) for line in rec.stdout.splitlines()}
expect(heads == {"4", "8"}, f"db records lists both models' entries: {heads}")

finish()
