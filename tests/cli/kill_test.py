"""A tune of several problems killed with SIGKILL over and over (at least 100 times, each
after a random 0-300 ms), restarted each time, then run to completion: no committed trial
is lost (the count never decreases), none is stored twice, the file stays valid
(PRAGMA integrity_check), and the completing run measures nothing already stored."""
import os
import random
import re
import signal
import sqlite3
import subprocess
import tempfile
import time

from clitest import ATTNTUNE, FIXTURES, run, expect, finish

KILLS = 100
tmp = tempfile.mkdtemp()
out = os.path.join(tmp, "out")
db = os.path.join(out, "attntune.db")
tiny = os.path.join(FIXTURES, "models/tiny/config.json")
# 14 problems, 112 candidates of some 50 ms each: about 100 killed runs' worth of work.
args = ["tune", "--retime", "off", "--model", tiny, "--variants", "dense,swa", "--seq-lens",
        "256,384,512,640,768,896,1024", "--budget", "8", "--strategy", "random", "--seed", "4",
        "--max-seconds", "0.05", "--out", out]
rng = random.Random(24)


def query(sql):
    con = sqlite3.connect(db)
    rows = con.execute(sql).fetchall()
    con.close()
    return rows


def has_schema():
    """A run killed before its schema was committed leaves no file or an empty one (the
    next run takes it as new)."""
    return os.path.exists(db) and bool(
        query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'trial'"))


def count():
    return query("SELECT count(*) FROM trial")[0][0] if has_schema() else 0


def stored_twice():
    """Keys holding more than one reusable trial (what a re-run would have reused)."""
    if not has_schema():
        return []
    return query("SELECT device_id, problem_id, config_id, build_id, count(*) FROM trial "
                 "WHERE status IN ('ok', 'invalid', 'wrong_result') "
                 "GROUP BY device_id, problem_id, config_id, build_id HAVING count(*) > 1")


kills = finished = 0
last = 0
problems = []
t0 = time.monotonic()
while kills < KILLS and time.monotonic() - t0 < 120:
    proc = subprocess.Popen([ATTNTUNE, *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        proc.wait(timeout=rng.uniform(0, 0.3))
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        kills += 1
    _, stderr = proc.communicate()
    if proc.returncode == 0:
        finished += 1
    elif proc.returncode != -signal.SIGKILL:
        problems.append(f"run {kills + finished}: exit {proc.returncode}: {stderr[-300:]!r}")
    now = count()
    if now < last:
        problems.append(f"after kill {kills}: {now} trials, {last} before")
    last = now
    twice = stored_twice()
    if twice:
        problems.append(f"after kill {kills}: stored twice {twice}")
took = time.monotonic() - t0
expect(kills >= KILLS, f"{kills} SIGKILLs delivered ({finished} runs finished first) in {took:.0f} s, "
       f"{last} trials stored")
expect(not problems, f"no trial lost or stored twice, no other exit: {problems[:5]}")
expect(query("PRAGMA integrity_check") == [("ok",)], "integrity_check is ok")

before = count()
p = run(*args, check=0)
m = re.search(r"(\d+) evaluations \((\d+) measured, (\d+) from the database", p.stdout)
after = count()
expect(m is not None and int(m.group(2)) == after - before,
       f"the completing run measured only what was not stored ({before} stored before, "
       f"{after} after): {p.stdout.strip()}")
expect(not stored_twice(), "none stored twice in the end")
expect(query("SELECT count(*) FROM claim") == [(0,)], "no claim is left behind")
expect(query("PRAGMA integrity_check") == [("ok",)], "integrity_check is ok in the end")
finish()
