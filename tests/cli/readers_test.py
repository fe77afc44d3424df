"""The readers of a database (db info, emit, report) write nothing into it: a database in
a read-only folder reads, a zero-byte file is refused and left empty, and a file with a
page overwritten is refused in one line instead of yielding an empty config."""
import hashlib
import os
import random
import shutil
import stat
import subprocess
import tempfile

from clitest import ATTNTUNE, FIXTURES, run, expect, finish

tmp = tempfile.mkdtemp()
os.chmod(tmp, 0o755)
tiny = os.path.join(FIXTURES, "models/tiny/config.json")
made = os.path.join(tmp, "made")
run("tune", "--model", tiny, "--variants", "dense,swa", "--seq-lens", "64,96", "--budget", "3",
    "--strategy", "random", "--seed", "1", "--max-seconds", "0.05", "--out", made, check=0)
source = os.path.join(made, "attntune.db")


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def expect_refusal(path, line):
    """db info, emit and report on `path`: one line, exit 2, the file unchanged."""
    before = digest(path)
    out = os.path.join(tmp, "refused_out")
    for args in (["db", "info", "--db", path], ["emit", "--db", path, "--out", out],
                 ["report", "--db", path, "--out", os.path.join(out, "r.html")]):
        p = run(*args)
        expect(p.returncode == 2 and p.stderr.splitlines() == [line] and p.stdout == "",
               f"attntune {args[0]} {args[1]} -> {line!r}\n  got exit {p.returncode}, "
               f"stderr {p.stderr!r}, stdout {p.stdout!r}")
    expect(digest(path) == before, f"the readers left {os.path.basename(path)} unchanged")
    expect(not os.path.exists(out), "and wrote no outputs")


# A zero-byte file: SQLite would take it for an empty database; a reader refuses it.
empty = os.path.join(tmp, "empty.db")
open(empty, "wb").close()
expect_refusal(empty, f"attntune: error: {empty}: empty file, not an attntune database")
expect(os.path.getsize(empty) == 0, "the empty file is still empty")

# 4 KiB in the middle overwritten: a page of the file replaced by noise.
damaged = os.path.join(tmp, "damaged.db")
shutil.copy(source, damaged)
size = os.path.getsize(damaged)
with open(damaged, "r+b") as f:
    f.seek(size // 2 // 4096 * 4096)
    f.write(random.Random(24).randbytes(4096))
p = run("db", "info", "--db", damaged)
line = p.stderr.strip()
prefix = f"attntune: error: {damaged}: the database is damaged ("
expect(p.returncode == 2 and line.startswith(prefix) and line.endswith(")") and "\n" not in line,
       f"db info names the damage in one line: {p.stderr!r}")
if line.startswith(prefix):
    expect_refusal(damaged, line)

# A read-only folder: the readers work there. As root the folder's mode does not stop a
# write, so the commands run as nobody then.
ro = os.path.join(tmp, "ro")
os.mkdir(ro)
ro_db = os.path.join(ro, "attntune.db")
shutil.copy(source, ro_db)
v1 = os.path.join(ro, "v1.db")
shutil.copy(os.path.join(FIXTURES, "db/v1.db"), v1)
for path in (ro_db, v1):
    os.chmod(path, 0o444)
os.chmod(ro, 0o555)
writable = os.path.join(tmp, "outputs")
os.mkdir(writable)
os.chmod(writable, 0o777)
as_nobody = None
if os.geteuid() == 0:
    def as_nobody():
        os.setgid(65534)
        os.setuid(65534)


# nobody must reach the binary: a checkout under a folder only root can enter (mktemp -d
# makes them 0700) gets a copy of it in tmp (its libraries are the system's).
reader = ATTNTUNE
if as_nobody is not None:
    try:
        subprocess.run([ATTNTUNE, "--help"], capture_output=True, timeout=60,
                       stdin=subprocess.DEVNULL, preexec_fn=as_nobody)
    except PermissionError:
        reader = os.path.join(tmp, "attntune")
        shutil.copy(ATTNTUNE, reader)
        os.chmod(reader, 0o755)


def run_reader(*args):
    return subprocess.run([reader, *args], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, preexec_fn=as_nobody)


probe = subprocess.run(["touch", os.path.join(ro, "probe")], capture_output=True,
                       preexec_fn=as_nobody)
expect(probe.returncode != 0, "the folder is read-only to the readers")
for path, version, trials in ((ro_db, 4, None), (v1, 1, 22)):
    before = digest(path)
    p = run_reader("db", "info", "--db", path)
    expect(p.returncode == 0 and f"schema version: {version}" in p.stdout,
           f"db info reads {os.path.basename(path)} in a read-only folder: {p.stdout!r} {p.stderr!r}")
    if trials is not None:
        expect(f"trials {trials} " in p.stdout, f"and counts its {trials} trials")
    out = os.path.join(writable, os.path.basename(path))
    p = run_reader("emit", "--db", path, "--out", out)
    expect(p.returncode == 0 and os.path.getsize(os.path.join(out, "attntune_config.json")) > 0,
           f"emit reads {os.path.basename(path)} in a read-only folder: {p.stderr!r}")
    p = run_reader("report", "--db", path, "--out", os.path.join(writable, "r.html"))
    expect(p.returncode == 0, f"report reads {os.path.basename(path)}: {p.stderr!r}")
    expect(digest(path) == before, f"{os.path.basename(path)} is unchanged")
expect(sorted(os.listdir(ro)) == ["attntune.db", "v1.db"], f"nothing was written beside: {os.listdir(ro)}")
os.chmod(ro, 0o755)
finish()
