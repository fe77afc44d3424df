"""A full disk is no mistake of the user's: writing an output or the database fails in one
line "attntune: failed: ..." with exit 1, the database stays valid, the previous outputs
stay as they were, and a re-run reuses the trials stored before the failure. The disk
fills by the file size limit (RLIMIT_FSIZE: a write past it fails with EFBIG)."""
import hashlib
import json
import os
import re
import resource
import signal
import sqlite3
import subprocess
import tempfile

from clitest import ATTNTUNE, FIXTURES, run, expect, finish

tmp = tempfile.mkdtemp()
out = os.path.join(tmp, "out")
db = os.path.join(out, "attntune.db")
tiny = os.path.join(FIXTURES, "models/tiny/config.json")
base = ["tune", "--model", tiny, "--variants", "dense,swa", "--budget", "3", "--strategy",
        "random", "--seed", "2", "--max-seconds", "0.05", "--out", out]
run(*base, "--seq-lens", "64", check=0)
OUTPUTS = ["attntune_config.h", "attntune_config.json", "report.html"]


def digests():
    result = {}
    for name in OUTPUTS:
        with open(os.path.join(out, name), "rb") as f:
            result[name] = hashlib.sha256(f.read()).hexdigest()
    return result


def run_limited(limit, *args):
    """attntune with files limited to `limit` bytes (SIGXFSZ ignored: the write fails)."""
    def lower():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
    return subprocess.run([ATTNTUNE, *args], capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL, preexec_fn=lower)


def trials():
    con = sqlite3.connect(db)
    rows = con.execute("SELECT device_id, problem_id, config_id, build_id FROM trial").fetchall()
    con.close()
    return rows


def integrity():
    con = sqlite3.connect(db)
    result = con.execute("PRAGMA integrity_check").fetchall()
    con.close()
    return result


before = digests()

# An output: emit's header (6 KB) and JSON fit under 64 KiB, its report (200 KB) does not.
# (64 KiB leaves room for the 32 KiB WAL index SQLite keeps beside the database.)
p = run_limited(64 * 1024, "emit", "--db", db, "--out", out)
report = os.path.join(out, "report.html")
expect(p.returncode == 1 and
       p.stderr.splitlines() == [f"attntune: failed: {report}: cannot write (File too large)"],
       f"emit on a full disk fails in one line, exit 1: {p.returncode} {p.stderr!r}")
expect(digests()["report.html"] == before["report.html"], "the previous report is intact")
with open(os.path.join(out, "attntune_config.json")) as f:
    expect(len(json.load(f)["entries"]) > 0, "the JSON written before the failure is whole")
expect(not [n for n in os.listdir(out) if ".tmp" in n],
       f"no temporary file is left: {sorted(os.listdir(out))}")
before = digests()

# The database: a tune of new lengths whose WAL outgrows 192 KiB after a few trials (a
# trial's commit adds about 32 KiB: at 64 KiB one trial of the tune's 30 was kept, and in
# one run under `ctest -j2` none; at 192 KiB five).
stored = len(trials())
p = run_limited(192 * 1024, *base, "--seq-lens", "96,128,160")
lines = p.stderr.splitlines()
failed = [line for line in lines if re.match(r"attntune: (error|failed):", line)]
expect(p.returncode == 1 and len(failed) == 1 and lines[-1] == failed[0] and
       failed[0].startswith(f"attntune: failed: {db}: "),
       f"a tune on a full disk fails in one line naming the database, exit 1: {p.returncode} "
       f"{lines[-3:]!r}")
expect(integrity() == [("ok",)], "the database is valid")
kept = trials()
expect(len(kept) > stored, f"the trials committed before the failure are kept ({len(kept)})")
expect(digests() == before, "the previous outputs are intact")

p = run(*base, "--seq-lens", "96,128,160", check=0)
m = re.search(r"(\d+) evaluations \((\d+) measured, (\d+) from the database", p.stdout)
expect(m is not None and int(m.group(3)) == len(kept) - stored,
       f"the re-run reuses the {len(kept) - stored} trials stored before the failure: {p.stdout}")
after = trials()
expect(len(after) == len(set(after)), "and stores none twice")
finish()
