"""attntune tune on several MPI ranks (CPU ranks here, mpirun --oversubscribe): the trials a
tune on 3 ranks stores are those the same tune stores in one process (the same
configurations under exhaustive and random, with the same statuses and quality; the same
count under auto), each once; a worker rank killed mid-run loses nothing (the job
finishes on the others under --enable-recovery; without it mpirun stops the job, and a
re-run measures only what was not stored), nor does a killed rank 0 (the writer): the
file stays valid and no stored trial is measured again; a rank's setup error is one
line from rank 0. Skipped (77) when this attntune was built without MPI."""
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

from clitest import ATTNTUNE, FIXTURES, run, expect, finish

ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
# Under the sanitizers (no effect otherwise): Open MPI's own allocations left at exit are
# suppressed by library; its plugins stay loaded (not dlclose'd) and stacks are unwound
# in full, so that each leak's frames name the library that made it.
ENV.update(OMPI_MCA_mca_base_component_disable_dlclose="1",
           LSAN_OPTIONS="suppressions=" + os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                       "lsan_openmpi.supp") +
           ":fast_unwind_on_malloc=0")
if os.environ.get("ATTNTUNE_HAVE_MPI") != "ON" or shutil.which("mpirun") is None:
    if shutil.which("mpirun") is not None:
        # A build without MPI refuses a launch of several ranks, in one line from rank 0.
        p = subprocess.run(["mpirun", "--oversubscribe", "-np", "3", ATTNTUNE, "tune", "--retime", "off", "--model",
                            os.path.join(FIXTURES, "models/tiny/config.json"), "--budget", "1",
                            "--seq-lens", "64", "--out", tempfile.mkdtemp()],
                           capture_output=True, text=True, timeout=300, env=ENV,
                           stdin=subprocess.DEVNULL)
        lines = [l for l in p.stdout.splitlines() + p.stderr.splitlines() if l.startswith("attntune")]
        if lines != ["attntune: error: launched as 3 MPI ranks, but this attntune was built "
                     "without MPI (install libopenmpi-dev with scripts/install-deps.sh and build "
                     "again)"]:
            print(f"FAIL: a launch of 3 ranks without MPI: {lines}")
            sys.exit(1)
        print("ok: a launch of 3 ranks without MPI is refused in one line")
    print("skipped: this attntune was built without MPI (or mpirun is missing)")
    sys.exit(77)

tmp = tempfile.mkdtemp()
# The tune of the issue: 9 problems of Qwen3-1.7B's geometry, 8 candidates each; each
# candidate timed for at most 50 ms after its gate, so that the test stays short.
TUNE = ["tune", "--retime", "off", "--device", "cpu", "--seq-lens", "64,128,256", "--variants", "dense,swa,ks",
        "--budget", "8", "--max-seconds", "0.05"]
# The same shape of tune on the tiny model (4 heads, d=32): 12 problems of cheap candidates.
TINY = ["tune", "--retime", "off", "--device", "cpu", "--model", os.path.join(FIXTURES, "models/tiny/config.json"),
        "--seq-lens", "64,128,256,384", "--variants", "dense,swa,ks", "--budget", "8",
        "--max-seconds", "0.05"]
SUMMARY = re.compile(r"(\d+) evaluations \((\d+) measured, (\d+) from the database, (\d+) failed\)")


def mpirun(ranks, args, extra=(), timeout=600):
    return subprocess.run(["mpirun", "--oversubscribe", *extra, "-np", str(ranks), ATTNTUNE, *args],
                          capture_output=True, text=True, timeout=timeout, env=ENV,
                          stdin=subprocess.DEVNULL)


def query(db, sql):
    con = sqlite3.connect(db, timeout=30)
    rows = con.execute(sql).fetchall()
    con.close()
    return rows


def stored(db):
    """Trials stored so far (0 before the tune has made its schema)."""
    try:
        return query(db, "SELECT count(*) FROM trial")[0][0]
    except sqlite3.Error:
        return 0


def trials(db):
    """{(Lk, variant, impl, params, tunables): [(status, rel_err, mass_recall, pairs)]}"""
    out = {}
    for row in query(db, """
        SELECT p.Lk, c.variant, c.implementation, c.params_json, c.tunables_json, t.status,
               (SELECT value FROM metric m WHERE m.trial_id = t.id AND m.name = 'rel_err'),
               (SELECT value FROM metric m WHERE m.trial_id = t.id AND m.name = 'mass_recall'),
               (SELECT value FROM metric m WHERE m.trial_id = t.id AND m.name = 'pairs')
        FROM trial t JOIN problem p ON p.id = t.problem_id JOIN config c ON c.id = t.config_id"""):
        out.setdefault(row[:5], []).append(row[5:])
    return {k: tuple(v) for k, v in out.items()}


def stored_twice(db):
    return query(db, "SELECT device_id, problem_id, config_id, build_id, count(*) FROM trial "
                     "GROUP BY device_id, problem_id, config_id, build_id HAVING count(*) > 1")


def summary(stdout):
    m = SUMMARY.search(stdout)
    return tuple(int(g) for g in m.groups()) if m else None


def valid(db, what):
    expect(query(db, "PRAGMA integrity_check") == [("ok",)], f"{what}: integrity_check is ok")
    expect(not stored_twice(db), f"{what}: no candidate stored twice")


# 1. The same tune in one process and on 3 ranks (auto, whose points depend on what is
# measured, on the tiny model: it only has to store the same number).
for strategy in ("exhaustive", "random", "auto"):
    args = (TINY if strategy == "auto" else TUNE) + ["--strategy", strategy, "--seed", "3"]
    count = 96 if strategy == "auto" else 72
    serial_out, mpi_out = os.path.join(tmp, "serial_" + strategy), os.path.join(tmp, "mpi_" + strategy)
    t0 = time.monotonic()
    one = run(*args, "--out", serial_out, check=0)
    t1 = time.monotonic()
    three = mpirun(3, args + ["--out", mpi_out])
    t2 = time.monotonic()
    expect(three.returncode == 0, f"{strategy}: mpirun -np 3 finished: {three.stderr[-500:]!r}")
    a, b = trials(os.path.join(serial_out, "attntune.db")), trials(os.path.join(mpi_out, "attntune.db"))
    expect(summary(three.stdout) == (count, count, 0, 0) and "on 3 ranks" in three.stdout,
           f"{strategy}: {count} evaluations measured on 3 ranks ({t1 - t0:.0f} s in one process, "
           f"{t2 - t1:.0f} s on 3 ranks): {three.stdout.splitlines()[:1]}")
    expect(all(len(v) == 1 for v in a.values()) and all(len(v) == 1 for v in b.values()),
           f"{strategy}: each configuration stored once")
    for rank in (1, 2):
        expect(f"[rank {rank}]" in three.stderr, f"{strategy}: rank {rank} evaluated candidates")
    if strategy == "auto":
        expect(len(a) == len(b) == count, f"{strategy}: the same count ({len(a)}, {len(b)})")
    else:
        expect(a == b, f"{strategy}: the same configurations with the same statuses, rel_err, "
                       f"mass_recall and pairs ({len(a)} and {len(b)}; differing: "
                       f"{sorted(set(a.items()) ^ set(b.items()))[:3]})")
expected = 96  # the tiny tune's candidates


def start(args, extra=()):
    return subprocess.Popen(["mpirun", "--oversubscribe", *extra, "-np", "3", ATTNTUNE, *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
                            stdin=subprocess.DEVNULL)


def rank_pid(launcher, rank):
    """The pid of MPI rank `rank` among the launcher's children (from its environment)."""
    for _ in range(200):
        for child in subprocess.run(["pgrep", "-P", str(launcher.pid)], capture_output=True,
                                    text=True).stdout.split():
            try:
                with open(f"/proc/{child}/environ", "rb") as f:
                    env = f.read().split(b"\0")
            except OSError:
                continue
            if f"OMPI_COMM_WORLD_RANK={rank}".encode() in env:
                return int(child)
        time.sleep(0.05)
    return None


def kill_when_stored(launcher, db, rank, at_least):
    """SIGKILLs rank `rank` once `at_least` trials are stored; the count then."""
    pid = rank_pid(launcher, rank)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and launcher.poll() is None:
        if os.path.exists(db) and stored(db) >= at_least:
            break
        time.sleep(0.05)
    if pid is None or launcher.poll() is not None:
        return None
    os.kill(pid, signal.SIGKILL)
    return stored(db)


# 2. A worker killed mid-run, the launcher keeping the job alive: it ends on the others.
args = TINY + ["--strategy", "random", "--seed", "4", "--out", os.path.join(tmp, "recover")]
db = os.path.join(tmp, "recover", "attntune.db")
launcher = start(args, ["--enable-recovery"])
killed_at = kill_when_stored(launcher, db, 1, 10)
stdout, stderr = launcher.communicate(timeout=600)
expect(killed_at is not None and killed_at < expected, f"rank 1 killed mid-run ({killed_at} stored)")
expect(launcher.returncode == 0 and summary(stdout) is not None and summary(stdout)[0] == expected,
       f"the job finished on ranks 0 and 2: exit {launcher.returncode}, {stdout.splitlines()[:1]}")
expect(re.search(r"^attntune: rank 1 \(pid \d+ on .*\) is gone", stderr, re.M) is not None,
       f"one line names the rank: {[l for l in stderr.splitlines() if 'gone' in l]}")
expect(len(trials(db)) == expected, f"none lost: {len(trials(db))} of {expected} stored")
valid(db, "after the kill")
expect(query(db, "SELECT count(*) FROM claim") == [(0,)], "no claim left behind")
again = mpirun(3, args)
expect(summary(again.stdout) == (expected, 0, expected, 0),
       f"a re-run measures nothing again: {again.stdout.splitlines()[:1]}")

# 3. The same without --enable-recovery: mpirun stops the job naming the rank; a re-run
# measures only what was not stored.
args = TINY + ["--strategy", "random", "--seed", "5", "--out", os.path.join(tmp, "abort")]
db = os.path.join(tmp, "abort", "attntune.db")
launcher = start(args)
killed_at = kill_when_stored(launcher, db, 2, 10)
stdout, stderr = launcher.communicate(timeout=600)
expect(killed_at is not None and launcher.returncode != 0 and "rank 2" in stderr,
       f"mpirun stopped the job when rank 2 died ({killed_at} stored), exit {launcher.returncode}")
before = query(db, "SELECT count(*) FROM trial")[0][0]
valid(db, "after the job stopped")
again = mpirun(3, args)
after = query(db, "SELECT count(*) FROM trial")[0][0]
s = summary(again.stdout)
expect(s is not None and s[0] == expected and s[1] == after - before and s[2] == before,
       f"the re-run measured only what was not stored ({before} before, {after} after): {s}")
expect(len(trials(db)) == expected, "every candidate stored once in the end")
valid(db, "after the re-run")

# 4. Rank 0, the writer, killed mid-run: the file stays valid; a re-run completes it.
args = TINY + ["--strategy", "random", "--seed", "6", "--out", os.path.join(tmp, "writer")]
db = os.path.join(tmp, "writer", "attntune.db")
launcher = start(args)
killed_at = kill_when_stored(launcher, db, 0, 10)
launcher.communicate(timeout=600)
expect(killed_at is not None, f"rank 0 killed mid-run ({killed_at} stored)")
before = query(db, "SELECT count(*) FROM trial")[0][0]
valid(db, "after rank 0 was killed")
again = mpirun(3, args)
s = summary(again.stdout)
expect(s is not None and s[1] == expected - before and s[2] == before,
       f"the re-run measured only what was not stored ({before} before): {s}")
valid(db, "after the re-run")

# 4b. Rank 0 killed with the launcher keeping the job alive: the other ranks see its pid
# gone and stop on their own, also one in the middle of sending a result rank 0 never
# takes (a blocking send of a message past the eager size waited for ever).
args = TINY + ["--strategy", "random", "--seed", "7", "--out", os.path.join(tmp, "writer-recover")]
db = os.path.join(tmp, "writer-recover", "attntune.db")
launcher = start(args, ["--enable-recovery"])
killed_at = kill_when_stored(launcher, db, 0, 10)
try:
    stderr = launcher.communicate(timeout=120)[1]
    ended = True
except subprocess.TimeoutExpired:
    for child in subprocess.run(["pgrep", "-P", str(launcher.pid)], capture_output=True,
                                text=True).stdout.split():
        os.kill(int(child), signal.SIGKILL)
    launcher.kill()
    stderr = launcher.communicate()[1]
    ended = False
stops = [l for l in stderr.splitlines() if re.search(r"rank 0 \(pid \d+ on .*\) is gone; rank [12] stops", l)]
expect(killed_at is not None and ended and len(stops) == 2,
       f"rank 0 killed ({killed_at} stored), the other ranks stopped on their own: ended {ended}, "
       f"{stderr[-600:]!r}")
valid(db, "after rank 0 was killed under --enable-recovery")

# 5. Setup errors: one line, from rank 0, exit 2.
def one_error(result, line, what):
    lines = [l for l in result.stderr.splitlines() if l.startswith("attntune:")]
    expect(result.returncode == 2 and lines == [line],
           f"{what}: exit 2 and one line {line!r}: exit {result.returncode}, {lines}")


base = ["tune", "--retime", "off", "--model", os.path.join(FIXTURES, "models/tiny/config.json"), "--budget", "2",
        "--out", os.path.join(tmp, "errors")]
small = base + ["--seq-lens", "64,96"]
one_error(mpirun(3, small + ["--metrics"]),
          "attntune: error: --metrics: counter passes run in a tune of one process, not on 3 MPI "
          "ranks (tune here first, then run the same tune with --metrics on each device: it "
          "reuses every stored trial and reads only the counters)", "--metrics on 3 ranks")
mpmd = subprocess.run(["mpirun", "--oversubscribe", "-np", "2", ATTNTUNE, *small, ":", "-np", "1",
                       ATTNTUNE, *small, "--device", "nope"], capture_output=True, text=True,
                      timeout=300, env=ENV, stdin=subprocess.DEVNULL)
one_error(mpmd, "attntune: error: rank 2: --device: 'nope' is not a device (expected cpu or cuda:N)",
          "a device error on rank 2 only")
mpmd = subprocess.run(["mpirun", "--oversubscribe", "-np", "2", ATTNTUNE, *small, ":", "-np", "1",
                       ATTNTUNE, *base, "--seq-lens", "64"], capture_output=True, text=True,
                      timeout=300, env=ENV, stdin=subprocess.DEVNULL)
one_error(mpmd, "attntune: error: rank 2 was started with another tune than rank 0 (seq_lens [64] "
                "against [64,96]): every rank runs the same command", "another tune on rank 2")
expect(not os.path.exists(os.path.join(tmp, "errors", "attntune.db")) or
       query(os.path.join(tmp, "errors", "attntune.db"), "SELECT count(*) FROM trial") == [(0,)],
       "nothing was tuned")
finish()
