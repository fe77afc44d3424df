"""attntune db merge: databases tuned on two devices become one whose report shows both
devices and whose header has both; merging the same file again adds nothing; emit and
report read the result; a newer schema, a damaged file or the destination among the
inputs are refused in one line, and nothing is written."""
import os
import random
import re
import shutil
import sqlite3
import tempfile

from clitest import FIXTURES, run, expect, finish

tmp = tempfile.mkdtemp()
tiny = os.path.join(FIXTURES, "models/tiny/config.json")


def tune(name, seed):
    out = os.path.join(tmp, name)
    run("tune", "--model", tiny, "--variants", "dense,swa", "--seq-lens", "64,96", "--budget", "3",
        "--strategy", "random", "--seed", str(seed), "--max-seconds", "0.05", "--out", out, check=0)
    return os.path.join(out, "attntune.db")


def count(path, sql):
    con = sqlite3.connect(path)
    n = con.execute(sql).fetchone()[0]
    con.close()
    return n


a = tune("a", 1)
b = tune("b", 2)
# b as if tuned on another machine: its one device row given another CPU's fingerprint.
con = sqlite3.connect(b)
con.execute("UPDATE device SET name = 'Other CPU @ 3.0GHz', "
            "fingerprint_json = '{\"kind\":\"cpu\",\"model\":\"Other CPU @ 3.0GHz\"}'")
con.commit()
con.close()

# A re-timing's default named by its trial's number (a metric's value): one made on a
# trial of b for every problem, so that the check below does not depend on which trials
# the searches found faster than the default.
con = sqlite3.connect(b)
pairs = con.execute(
    "SELECT t.id, d.trial_id FROM trial t JOIN trial dt ON dt.problem_id = t.problem_id "
    "JOIN metric d ON d.trial_id = dt.id AND d.name = 'is_default' "
    "WHERE t.id != dt.id AND t.status = 'ok'").fetchall()
for trial, default in pairs:
    con.execute("INSERT OR REPLACE INTO metric(trial_id, name, value) "
                "VALUES (?, 'confirm_default_trial', ?)", (trial, default))
con.commit()
con.close()
expect(len(pairs) > 0, "b's trials name their defaults")


def defaults_named(path):
    """(trial, default) pairs of `path` as (config id, problem id, device name) triples."""
    con = sqlite3.connect(path)
    rows = con.execute(
        "SELECT t.config_id, t.problem_id, dv.name, dt.config_id, dt.problem_id, ddv.name, "
        "EXISTS(SELECT 1 FROM metric WHERE trial_id = dt.id AND name = 'is_default') "
        "FROM metric m JOIN trial t ON t.id = m.trial_id JOIN device dv ON dv.id = t.device_id "
        "LEFT JOIN trial dt ON dt.id = CAST(m.value AS INTEGER) "
        "LEFT JOIN device ddv ON ddv.id = dt.device_id "
        "WHERE m.name = 'confirm_default_trial'").fetchall()
    con.close()
    return rows


c = os.path.join(tmp, "c.db")
p = run("db", "merge", a, b, "--into", c, check=0)
# b's trials come after a's: its defaults' numbers change, and the metric follows them.
named = defaults_named(c)
expect(len(named) >= len({trial for trial, _ in pairs}) and
       all(r[3] is not None and r[1] == r[4] and r[2] == r[5] and r[6] == 1 for r in named),
       f"every re-timing names its own device's default of its problem after the merge: {named}")
trials_a = count(a, "SELECT count(*) FROM trial")
trials_b = count(b, "SELECT count(*) FROM trial")
expect(count(c, "SELECT count(*) FROM trial") == trials_a + trials_b,
       f"every trial once: {trials_a} + {trials_b} in the merge\n{p.stdout}")
expect(count(c, "SELECT count(*) FROM device") == 2, "two devices")
expect(count(c, "SELECT count(*) FROM sample") ==
       count(a, "SELECT count(*) FROM sample") + count(b, "SELECT count(*) FROM sample"),
       "with every sample")
expect(count(c, "SELECT count(*) FROM metric") ==
       count(a, "SELECT count(*) FROM metric") + count(b, "SELECT count(*) FROM metric"),
       "and every metric")
problems = count(a, "SELECT count(*) FROM problem")
expect(count(c, "SELECT count(*) FROM problem") == problems, "problems deduplicated")
expect(re.search(rf"{re.escape(b)}: added .*trial {trials_b}", p.stdout) is not None,
       f"the merge says what it added: {p.stdout!r}")

report = os.path.join(tmp, "report.html")
run("report", "--db", c, "--out", report, check=0)
html = open(report, encoding="utf-8").read()
expect("Other CPU @ 3.0GHz" in html and count(a, "SELECT name FROM device") in html,
       "the report shows both devices")
emitted = os.path.join(tmp, "emitted")
run("emit", "--db", c, "--out", emitted, check=0)
header = open(os.path.join(emitted, "attntune_config.h"), encoding="utf-8").read()
expect("Other CPU @ 3.0GHz" in header and count(a, "SELECT name FROM device") in header,
       "the header has both devices' entries")

before = {t: count(c, f"SELECT count(*) FROM {t}") for t in
          ("device", "problem", "config", "build", "run", "trial", "sample", "metric")}
p = run("db", "merge", a, a, b, "--into", c, check=0)
after = {t: count(c, f"SELECT count(*) FROM {t}") for t in before}
expect(after == before, f"merging the same files again adds nothing: {before} -> {after}")
expect(all(re.search(r"added (\w+ 0(, |$))+", line) for line in p.stdout.splitlines()
           if line.startswith(tmp)), f"and says so: {p.stdout!r}")
expect(count(c, "PRAGMA integrity_check") == "ok", "integrity_check is ok")


def refused(args, line):
    d = os.path.join(tmp, "d.db")
    p = run("db", "merge", *args, "--into", d)
    expect(p.returncode == 2 and p.stderr.splitlines() == [line] and p.stdout == "",
           f"db merge {args} -> {line!r}: exit {p.returncode}, {p.stderr!r}")
    expect(not os.path.exists(d), "and writes nothing")


newer = os.path.join(tmp, "newer.db")
shutil.copy(a, newer)
con = sqlite3.connect(newer)
supported = con.execute("PRAGMA user_version").fetchone()[0]  # what this attntune writes
con.execute("PRAGMA user_version = 9")
con.close()
refused([a, newer], f"attntune: error: {newer}: schema version 9 is newer than this attntune "
                    f"(supports {supported}); upgrade attntune")

damaged = os.path.join(tmp, "damaged.db")
shutil.copy(a, damaged)
size = os.path.getsize(damaged)
with open(damaged, "r+b") as f:
    f.seek(size // 2 // 4096 * 4096)
    f.write(random.Random(7).randbytes(4096))
d = os.path.join(tmp, "d.db")
p = run("db", "merge", damaged, "--into", d)
line = p.stderr.strip()
expect(p.returncode == 2 and line.startswith(f"attntune: error: {damaged}: the database is damaged (")
       and "\n" not in line and not os.path.exists(d), f"a damaged file is refused in one line: {p.stderr!r}")

p = run("db", "merge", a, c, "--into", c)
expect(p.returncode == 2 and p.stderr.splitlines() ==
       [f"attntune: error: --into: '{c}' is also a database to merge (name another file)"],
       f"the destination among the inputs is refused: {p.stderr!r}")

# An empty --into (SQLite's temporary database) kept nothing while saying it added all.
p = run("db", "merge", a, "--into", "")
expect(p.returncode == 2 and p.stderr.splitlines() ==
       ["attntune: error: --into: '' is not a file name (name the database)"],
       f"an empty --into is refused: {p.stderr!r}")
finish()
