"""Two tunes with identical arguments started at once on one database: both finish, and each
candidate is measured once (a tune claims a candidate before measuring it; the other waits
for its trial), never a "database is locked" for the user. Then two tunes of different
lengths at once on another database: both finish, every trial stored once."""
import os
import re
import sqlite3
import subprocess
import tempfile

from clitest import ATTNTUNE, FIXTURES, expect, finish

tmp = tempfile.mkdtemp()
out = os.path.join(tmp, "out")
tiny = os.path.join(FIXTURES, "models/tiny/config.json")
args = ["tune", "--retime", "off", "--model", tiny, "--variants", "dense,swa", "--seq-lens", "64,96,128",
        "--budget", "4", "--strategy", "random", "--seed", "3", "--max-seconds", "0.05",
        "--out", out]
procs = [subprocess.Popen([ATTNTUNE, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          stdin=subprocess.DEVNULL, text=True) for _ in range(2)]
results = [p.communicate(timeout=300) for p in procs]
SUMMARY = re.compile(r"(\d+) evaluations \((\d+) measured, (\d+) from the database, (\d+) failed\)")
measured = 0
for p, (stdout, stderr) in zip(procs, results):
    expect(p.returncode == 0, f"tune {p.pid} finished: exit {p.returncode}, {stderr[-300:]!r}")
    expect("locked" not in stderr and "busy" not in stderr,
           f"tune {p.pid} saw no locked database: {stderr[-300:]!r}")
    m = SUMMARY.search(stdout)
    expect(m is not None and int(m.group(1)) == 24, f"tune {p.pid} evaluated 24: {stdout!r}")
    measured += int(m.group(2)) if m else 0

con = sqlite3.connect(os.path.join(out, "attntune.db"))
per_key = con.execute("SELECT device_id, problem_id, config_id, build_id, "
                      "sum(status = 'ok'), count(*) FROM trial "
                      "GROUP BY device_id, problem_id, config_id, build_id").fetchall()
claims = con.execute("SELECT count(*) FROM claim").fetchone()[0]
con.close()
twice = [k for k in per_key if k[5] != 1]
expect(len(per_key) > 0 and not twice,
       f"every (device, problem, config, build) has one trial ({len(per_key)} keys): {twice}")
expect(all(k[4] == 1 for k in per_key), "and it is ok")
expect(measured == len(per_key), f"the two tunes measured {measured} in all, one per key")
expect(claims == 0, f"no claim is left behind ({claims})")

# Different lengths at once: nothing shared to claim, both write the same file.
out2 = os.path.join(tmp, "out2")
procs = [subprocess.Popen([ATTNTUNE, *args[:8], lens, *args[9:-1], out2], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
         for lens in ("64,96", "128,160")]
results = [p.communicate(timeout=300) for p in procs]
for p, (stdout, stderr) in zip(procs, results):
    m = SUMMARY.search(stdout)
    expect(p.returncode == 0 and "locked" not in stderr and m is not None and int(m.group(1)) == 16,
           f"tune {p.pid} of its own lengths finished, 16 evaluations: {stderr[-300:]!r}")
con = sqlite3.connect(os.path.join(out2, "attntune.db"))
rows = con.execute("SELECT count(*), count(DISTINCT device_id || '/' || problem_id || '/' || "
                   "config_id || '/' || build_id), sum(status = 'ok') FROM trial").fetchone()
integrity = con.execute("PRAGMA integrity_check").fetchall()
con.close()
expect(rows[0] == 32 and rows[1] == 32 and rows[2] == 32,
       f"the two tunes stored 32 trials, each once, all ok: {rows}")
expect(integrity == [("ok",)], "integrity_check is ok")
finish()
