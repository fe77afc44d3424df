"""A schema-1 database (tests/fixtures/db/v1.db) opens under this build: emit reads it as
it is (through a migrated copy in memory), a tune upgrades it in place, and a re-run of the
tune commands that made it adds trials without duplicating configs; a second re-run reuses
every trial."""
import json
import os
import re
import shutil
import sqlite3
import tempfile

from clitest import FIXTURES, run, expect, finish

SCHEMA = 4  # the schema this build writes
tmp = tempfile.mkdtemp()
out = os.path.join(tmp, "out")
db_path = os.path.join(tmp, "attntune.db")
shutil.copy(os.path.join(FIXTURES, "db/v1.db"), db_path)


def query(sql):
    con = sqlite3.connect(db_path)
    rows = con.execute(sql).fetchall()
    con.close()
    return rows


def counts():
    return [query(f"SELECT count(*) FROM {t}")[0][0] for t in ("trial", "sample", "metric")]


def configs():
    """(variant, implementation, params ∪ tunables) of every config row."""
    rows = query("SELECT variant, implementation, params_json, tunables_json FROM config")
    return [(v, i, json.dumps({**json.loads(p), **json.loads(t)}, sort_keys=True))
            for v, i, p, t in rows]


expect(query("PRAGMA user_version") == [(1,)], "the fixture is a schema-1 file")
before = counts()
v1_configs = query("SELECT variant, implementation, params_json FROM config")

with open(db_path, "rb") as f:
    v1_bytes = f.read()
# emit only reads: the file stays schema 1, read through a migrated copy in memory.
p = run("emit", "--db", db_path, "--out", out, check=0)
with open(db_path, "rb") as f:
    expect(f.read() == v1_bytes and query("PRAGMA user_version") == [(1,)],
           "emit left the schema-1 file as it was")
with open(os.path.join(FIXTURES, "db/v1_entries.json")) as f:
    v1_entries = json.load(f)
with open(os.path.join(out, "attntune_config.json")) as f:
    entries = json.load(f)["entries"]
# Keys added since (calibration sets and floors) are null for trials on Gaussian inputs.
ADDED = {"calibration": None, "mass_recall_worst": None, "rel_err_worst": None, "floor": None}
# And the comparisons (each implementation's best, the next best, the default: unknown in
# a file no re-timing wrote).
COMPARED = {"implementations", "next_best", "default"}
expect([{k: v for k, v in e.items() if k not in ADDED and k not in COMPARED} for e in entries]
       == v1_entries, f"emit gives the schema-1 code's {len(v1_entries)} entries")
expect(all(e["default"] is None and e["implementation"] in e["implementations"] for e in entries),
       "each entry's implementations compared; no default known in a schema-1 file")
expect(all({k: e[k] for k in ADDED} == ADDED for e in entries),
       "with no calibration set, no worst cell and no floor")

# The commands that made the fixture (tests/fixtures/db/README.md), timed briefly.
prefill = ["tune", "--retime", "off", "--seq-lens", "64,128", "--variants", "dense,swa,ks", "--budget", "3",
           "--max-seconds", "0.05", "--db", db_path, "--out", out]
decode = ["tune", "--retime", "off", "--seq-lens", "64", "--variants", "dense,dma_decode", "--phase", "decode",
          "--budget", "2", "--max-seconds", "0.05", "--db", db_path, "--out", out]
SUMMARY = re.compile(r"(\d+) evaluations \((\d+) measured, (\d+) from the database, (\d+) failed\)")


def rerun():
    result = []
    for args in (prefill, decode):
        p = run(*args, check=0)
        m = SUMMARY.search(p.stdout)
        expect(m is not None, f"tune {' '.join(args[1:5])} ran on the upgraded file")
        result.append(tuple(int(x) for x in m.groups()) if m else (0, 0, 0, 0))
    return result


first = rerun()
# The first writer upgraded the file in place.
expect(query("PRAGMA user_version") == [(SCHEMA,)], f"tune upgraded the file to schema {SCHEMA}")
merged = [(v, i, json.dumps(json.loads(p), sort_keys=True)) for v, i, p in v1_configs]
expect(set(merged) <= set(configs()), "every config keeps its parameters, split in two")
expect(query("SELECT params_json, tunables_json FROM config WHERE id = 4") ==
       [('{"sink":0,"w":512}', '{"Bc":32,"Br":32}')], "swa's config split by the v1 rule")
builds = query("SELECT count(*) FROM build")[0][0]
measured = sum(r[1] for r in first)
expect(counts()[0] == before[0] + measured, f"the re-run stored its {measured} measured trials")
expect(measured == 0 or builds == 2, "trials measured by this build are stored under it")
now = configs()
expect(len(set(now)) == len(now), f"no config stored twice ({len(now)} configs)")
expect(set(merged) <= set(now), "the fixture's configs are still there")

trials_after_first = counts()[0]
second = rerun()
expect(all(r[1] == 0 and r[2] == r[0] for r in second),
       f"a second re-run reuses every trial: {second}")
expect(counts()[0] == trials_after_first, "and stores nothing new")
expect(configs() == now, "nor any config")
finish()
