"""Bad input: one clear line on stderr and exit code 2 (DESIGN.md s7)."""
import json
import os
import re
import tempfile

from clitest import run, expect, finish, FIXTURES


def expect_error(args, line):
    p = run(*args)
    err = p.stderr.strip().splitlines()
    expect(p.returncode == 2 and err == [line] and p.stdout == "",
           f"attntune {' '.join(args)} -> {line!r}\n  got exit {p.returncode}, stderr {p.stderr!r}, "
           f"stdout {p.stdout!r}")


tmp = tempfile.mkdtemp()
corrupt = os.path.join(tmp, "corrupt.db")
with open(corrupt, "w") as f:
    f.write("this is not a database, just some text that a user pointed --db at\n" * 50)
truncated = os.path.join(tmp, "q.safetensors")
with open(truncated, "wb") as f:
    f.write(b"\x40\x00\x00\x00\x00\x00\x00\x00{\"q\":")

expect_error(["tune", "--variants", "dense,nosuch", "--out", tmp],
             "attntune: error: --variants: unknown variant 'nosuch' (known: dense, swa, hybrid, lsh, ks, hax, dma, dma_decode)")
expect_error(["tune", "--seq-lens", "1024,4k", "--out", tmp],
             "attntune: error: --seq-lens: '4k' is not a positive integer")
expect_error(["tune", "--budget", "abc", "--out", tmp],
             "attntune: error: --budget: 'abc' is not a positive integer")
expect_error(["tune", "--params", "w", "--out", tmp],
             "attntune: error: --params: 'w' is not NAME=VALUE")
expect_error(["tune", "--variants", "swa", "--params", "w=1024,k=8", "--out", tmp],
             "attntune: error: --params: 'k' is not a parameter of the variants tuned (swa.w, swa.sink)")
expect_error(["tune", "--time-budget", "10x", "--out", tmp],
             "attntune: error: --time-budget: '10x' is not a duration (e.g. 90s, 10m, 1.5h)")
expect_error(["tune", "--time-budget", "1e308h", "--out", tmp],
             "attntune: error: --time-budget: '1e308h' is longer than the limit of 1e7 s (116 days)")
expect_error(["run", "--variant", "dense", "--in", tmp, "--out", os.path.join(tmp, "o.st")],
             f"attntune: error: {tmp}: is a folder, not a safetensors file")
expect_error(["tune", "--time-budget", "0m", "--out", tmp],
             "attntune: error: --time-budget: '0m' is not a positive duration")
expect_error(["tune", "--time-budget", "nan", "--out", tmp],
             "attntune: error: --time-budget: 'nan' is not a duration (e.g. 90s, 10m, 1.5h)")
expect_error(["tune", "--batch", "0", "--out", tmp],
             "attntune: error: --batch: '0' is not a positive integer")
expect_error(["tune", "--warm-start", "maybe", "--out", tmp],
             "attntune: error: --warm-start: 'maybe' is not on or off")
expect_error(["tune", "--generic", "yes", "--out", tmp],
             "attntune: error: --generic: 'yes' is not on or off")
expect_error(["tune", "--phase", "decoding", "--out", os.path.join(tmp, "phase")],
             "attntune: error: --phase: 'decoding' is not prefill or decode")
expect(not os.path.exists(os.path.join(tmp, "phase")), "a tune with a bad --phase stores nothing")
expect_error(["frobnicate"],
             "attntune: error: unknown command 'frobnicate' (known: devices, variants, tune, bench, run, "
             "emit, report, db, replay, allocate)")
# Given twice, a length or a variant was tuned twice (with --time-budget, two shares).
expect_error(["tune", "--seq-lens", "64,128,64", "--out", tmp],
             "attntune: error: --seq-lens: 64 is given twice")
expect_error(["tune", "--variants", "dense,swa,dense", "--out", tmp],
             "attntune: error: --variants: 'dense' is given twice")
expect_error(["tune", "--seq-lens", "0", "--out", tmp],
             "attntune: error: --seq-lens: '0' is not a positive integer")
expect_error(["tune", "--model", os.path.join(FIXTURES, "models/bad_heads/config.json"), "--out", tmp],
             f"attntune: error: {os.path.join(FIXTURES, 'models/bad_heads/config.json')}: "
             "num_attention_heads 6 is not divisible by num_key_value_heads 4")
expect_error(["tune", "--model", "no-such-model", "--out", tmp],
             "attntune: error: --model: 'no-such-model' is neither a known model (qwen3-1.7b, "
             "qwen3-8b, llama-3.1-8b, mistral-7b-v0.3, qwen2.5-0.5b, gemma-2-2b) nor a readable "
             "config.json")
expect_error(["tune", "--strategy", "magic", "--out", tmp],
             "attntune: error: --strategy: unknown strategy 'magic' (known: exhaustive, random, "
             "annealing, genetic, ils, bo, bandit, auto)")
expect_error(["tune", "--device", "tpu", "--out", tmp],
             "attntune: error: --device: 'tpu' is not a device (expected cpu or cuda:N)")
expect_error(["tune", "--db", corrupt, "--seq-lens", "64", "--out", tmp],
             f"attntune: error: {corrupt}: not an attntune database (file is not a database)")
expect_error(["db", "info", "--db", corrupt],
             f"attntune: error: {corrupt}: not an attntune database (file is not a database)")
expect_error(["db", "info", "--db", os.path.join(tmp, "absent.db")],
             f"attntune: error: --db: '{os.path.join(tmp, 'absent.db')}' does not exist")
expect_error(["bench", "--variant", "dense", "--shape", "B=1,Hq=6,Hkv=4,L=64,d=64"],
             "attntune: error: --shape: Hq=6 is not divisible by Hkv=4")
expect_error(["bench", "--variant", "swa", "--params", "w=0", "--shape", "Hq=2,Hkv=1,L=64,d=64"],
             "attntune: error: --params: w=0 is out of range (w >= 1)")
expect_error(["bench", "--variant", "swa", "--impl", "fast", "--params", "w=4", "--shape", "Hq=2,Hkv=1,L=64,d=64"],
             "attntune: error: --impl: unknown implementation 'fast' of swa (known: tiled, generic)")
expect_error(["bench", "--variant", "swa", "--params", "w=abc", "--shape", "Hq=2,Hkv=1,L=64,d=64"],
             "attntune: error: --params: w='abc' is not an integer")
expect_error(["run", "--variant", "dense", "--in", os.path.join(tmp, "missing.safetensors"),
              "--out", os.path.join(tmp, "o.safetensors")],
             f"attntune: error: {os.path.join(tmp, 'missing.safetensors')}: cannot open "
             "(No such file or directory)")
expect_error(["run", "--variant", "nosuch", "--in", truncated, "--out", os.path.join(tmp, "o.safetensors")],
             "attntune: error: --variant: unknown variant 'nosuch' (known: dense, swa, hybrid, lsh, ks, hax, dma, dma_decode)")

# No GPU here: a CUDA device is refused with the reason; the CPU is unaffected.
if os.environ.get("ATTNTUNE_HAVE_CUDA") == "ON":
    reason = "no usable CUDA driver (cudaGetDeviceCount: cudaErrorInsufficientDriver, 35)"
else:
    reason = "this attntune was built without CUDA support"
if os.environ.get("ATTNTUNE_EXPECT_NO_GPU", "1") == "1":
    expect_error(["tune", "--device", "cuda:0", "--out", tmp], f"attntune: error: --device cuda:0: {reason}")
    expect_error(["tune", "--device", "cuda:0", "--phase", "decode", "--out", tmp],
                 f"attntune: error: --device cuda:0: {reason}")
    expect_error(["bench", "--variant", "dense", "--device", "cuda:0"],
                 f"attntune: error: --device cuda:0: {reason}")
    p = run("devices", check=0)
    expect(f"cuda: none usable: {reason}" in p.stdout, "devices says why there is no CUDA device")
expect_error(["bench", "--variant", "dense", "--device", "cuda:x"],
             "attntune: error: --device: 'cuda:x' is not a device (expected cpu or cuda:N)")
expect_error(["bench", "--variant", "dense", "--dtype", "fp16", "--shape", "Hq=2,Hkv=1,L=64,d=64"],
             "attntune: error: --dtype: 'fp16' is not available on cpu (it takes fp32)")
expect_error(["bench", "--variant", "dense", "--flush-l2", "--shape", "Hq=2,Hkv=1,L=64,d=64"],
             "attntune: error: --flush-l2: the cpu backend cannot flush a cache between repetitions")
expect_error(["bench", "--variant", "dense", "--metrics", "--shape", "Hq=2,Hkv=1,L=64,d=64"],
             "attntune: error: --metrics: the cpu backend has no hardware counters")
expect_error(["tune", "--metrics", "--out", tmp],
             "attntune: error: --metrics: the cpu backend has no hardware counters")
expect_error(["tune", "--dtype", "bf16", "--out", tmp],
             "attntune: error: --dtype: 'bf16' is not available on cpu (it takes fp32)")
# Numbers that are not numbers a timer or a tolerance can use ("nan" passes CLI11's own
# range checks: every comparison with NaN is false).
S64 = "Hq=2,Hkv=1,L=64,d=64"
tiny = os.path.join(FIXTURES, "models", "tiny", "config.json")
for value in ["-1", "0", "nan", "inf"]:
    expect_error(["bench", "--variant", "dense", "--shape", S64, "--max-seconds", value],
                 f"attntune: error: --max-seconds: '{value}' is not a positive number")
expect_error(["tune", "--max-seconds", "nan", "--out", tmp],
             "attntune: error: --max-seconds: 'nan' is not a positive number")
expect_error(["tune", "--tolerance", "-1e-5", "--out", tmp],
             "attntune: error: --tolerance: '-1e-5' is not a non-negative number")
for value in ["0x10", "", " 1", "1e-5x"]:  # CLI11's conversion alone took "0x10" as 16
    expect_error(["tune", "--model", tiny, "--seq-lens", "64", "--budget", "1", "--tolerance",
                  value, "--out", tmp],
                 f"attntune: error: --tolerance: '{value}' is not a non-negative number")
for value in ["0", "2.5", "1000000000"]:  # 10^9 reserved 8 GB and ran 10^9 repetitions
    expect_error(["bench", "--variant", "dense", "--shape", S64, "--min-reps", value],
                 f"attntune: error: --min-reps: '{value}' is not a count of repetitions from 1 to 1000000")
expect_error(["allocate", "--rho", "0.5", "--min-reps", "1000001"],
             "attntune: error: --min-reps: '1000001' is not a count of repetitions from 1 to 1000000")
expect_error(["allocate", "--rho", "0.5", "--max-seconds", "-2"],
             "attntune: error: --max-seconds: '-2' is not a positive number")
# Seeds as decimal digits only: CLI11 alone read "-1" and 2^64 as 2^64 - 1, "" as 0 and
# "0x10" as 16.
for value in ["-1", "", "0x10", "18446744073709551616", " 7", "1e3"]:
    expect_error(["bench", "--variant", "dense", "--shape", S64, "--seed", value],
                 f"attntune: error: --seed: '{value}' is not a seed (decimal digits, at most "
                 "18446744073709551615)")
for cmd in (["tune", "--model", tiny, "--seq-lens", "64", "--budget", "1", "--out", tmp],
            ["replay", "--cache", "x.json"],
            ["allocate", "--rho", "0.5", "--no-measure", "--out", tmp]):
    expect_error(cmd + ["--seed", "-1"], "attntune: error: --seed: '-1' is not a seed (decimal "
                 "digits, at most 18446744073709551615)")
p = run("bench", "--variant", "dense", "--shape", S64, "--seed", "18446744073709551615",
        "--unchecked", "--max-seconds", "0.001")
expect(p.returncode == 0, f"the largest seed is a seed: {p.returncode} {p.stderr.strip()}")


def expect_too_big(args, what, shape):
    """A shape larger than this machine's memory: one line naming it, before anything is
    allocated (the line ends with the machine's memory, so only its start is fixed)."""
    p = run(*args)
    err = p.stderr.strip().splitlines()
    start = f"attntune: error: {what}: {shape} needs "
    expect(p.returncode == 2 and len(err) == 1 and err[0].startswith(start) and
           err[0].endswith(" GiB of memory") and p.stdout == "",
           f"attntune {' '.join(args)} -> {start}...\n  got exit {p.returncode}, stderr {p.stderr!r}")


expect_too_big(["bench", "--variant", "dense", "--shape", "B=1,Hq=1024,Hkv=1,L=16777216,d=1024"],
               "--shape", "B=1,Hq=1024,Hkv=1,L=16777216,d=1024")
fresh = os.path.join(tmp, "too_big")
expect_too_big(["tune", "--seq-lens", "64,16000000", "--out", fresh],
               "--seq-lens", "B=1,Hq=16,Hkv=8,L=16000000,d=128")
expect(not os.path.exists(fresh), "a tune whose shape cannot fit stores nothing")
wide = os.path.join(tmp, "wide.json")  # 1024 query heads on one KV head: a group of 1024
with open(wide, "w") as f:
    f.write('{"num_hidden_layers": 2, "num_attention_heads": 1024, "num_key_value_heads": 1, '
            '"head_dim": 64}')
expect_too_big(["allocate", "--model", wide, "--rho", "0.5", "--no-measure", "--calib-len",
                "16777216", "--out", fresh], "--calib-len", "B=1,Hq=1024,Hkv=1,L=16777216,d=64")

# Past the limits (docs/reliability.md "Limits"): one line naming the limit.
expect_error(["bench", "--variant", "dense", "--shape", "B=1,Hq=2,Hkv=1,L=99999999999,d=64"],
             "attntune: error: --shape: Lq=99999999999 is longer than attntune takes (16777216 tokens)")
expect_error(["tune", "--seq-lens", "64,100000000", "--out", fresh],
             "attntune: error: --seq-lens: 100000000 is longer than attntune takes (16777216 tokens)")
expect_error(["tune", "--batch", "65537", "--out", fresh],
             "attntune: error: --batch: 65537 is more than attntune takes (65536)")
expect_error(["tune", "--model", "/dev/zero", "--out", fresh],
             "attntune: error: /dev/zero: holds more than attntune reads as a config.json (16 MiB)")
expect_error(["run", "--variant", "dense", "--in", "/dev/zero", "--out", os.path.join(tmp, "o.st")],
             "attntune: error: /dev/zero: is not a regular file (a safetensors file's size is "
             "checked before it is read)")
expect_error(["replay", "--cache", tmp],
             f"attntune: error: {tmp}: is a folder, not a Kernel Tuner cache or T4 file")
expect(not os.path.exists(fresh), "nothing stored past a limit")

# replay: the largest budget times the repeats bounded (a budget of 10^12 built a curve of
# 10^12 points and never ended; 2e9 repeats ended in bad_alloc), and the threads.
cache = os.path.join(tmp, "cache.json")
with open(cache, "w") as f:
    f.write('{"tune_params_keys": ["a"], "tune_params": {"a": [1, 2]}, '
            '"cache": {"1": {"a": 1, "time": 1.0}, "2": {"a": 2, "time": 2.0}}}')
expect_error(["replay", "--cache", cache, "--budget", "1000000000000", "--repeats", "3"],
             "attntune: error: --budget, --repeats: 1000000000000 evaluations x 3 repeats is more "
             "than a replay runs (10000000 in all)")
expect_error(["replay", "--cache", cache, "--budget", "4", "--repeats", "2000000000"],
             "attntune: error: --budget, --repeats: 4 evaluations x 2000000000 repeats is more "
             "than a replay runs (10000000 in all)")
expect_error(["replay", "--cache", cache, "--threads", "100000"],
             "attntune: error: --threads: 100000 is more than attntune starts (1024)")
# Each repeat also runs to the score's time budget, which the budget alone did not bound:
# --budget 1 --repeats 10000000 ran for hours.
wide = os.path.join(tmp, "wide-cache.json")
with open(wide, "w") as f:
    json.dump({"tune_params_keys": ["a"], "tune_params": {"a": list(range(2000))},
               "cache": {str(i): {"a": i, "time": 1.0 + (i * 7919 % 2000) / 100.0, "compile_time": 1.0}
                         for i in range(2000)}}, f)
p = run("replay", "--cache", wide, "--budget", "1", "--repeats", "10000000")
expect(p.returncode == 2 and re.fullmatch(
    r"attntune: error: --repeats: 10000000 repeats of about \d+ evaluations each \(" + re.escape(wide) +
    r": the score's time budget\) is more than a replay runs \(10000000 in all\)\n", p.stderr) is not None,
    f"replay bounds the score's evaluations too: exit {p.returncode}, {p.stderr!r}")
# Counts as decimal digits: CLI11 alone took '' as 0 (--threads '' ran one per hardware
# thread) and "0x10" as 16.
expect_error(["replay", "--cache", cache, "--threads", ""],
             "attntune: error: --threads: '' is not a non-negative integer")
expect_error(["replay", "--cache", cache, "--repeats", "0x10"],
             "attntune: error: --repeats: '0x10' is not a positive integer")
expect_error(["replay", "--cache", cache, "--batch", "0"],
             "attntune: error: --batch: '0' is not a positive integer")
expect_error(["run", "--variant", "dense", "--in", cache, "--out", os.path.join(tmp, "o.st"),
              "--layer", "1.5"],
             "attntune: error: --layer: '1.5' is not a non-negative integer")

# An output never replaces what the command reads: report, emit, tune and allocate refuse
# an output path that is the database (report --out DB left an HTML page where every trial
# was, exit 0), replay a --report that is a --cache file.
store = os.path.join(tmp, "store")
os.makedirs(store)
db = os.path.join(store, "report.html")
run("tune", "--model", tiny, "--variants", "dense", "--seq-lens", "64", "--budget", "1",
    "--retime", "off", "--db", db, "--out", os.path.join(tmp, "store-out"), check=0)
with open(db, "rb") as f:
    stored = f.read()
expect_error(["report", "--db", db, "--out", db],
             f"attntune: error: {db}: is the database ({db}); give another output path")
expect_error(["emit", "--db", db, "--out", store],
             f"attntune: error: {db}: is the database ({db}); give another output path")
link = os.path.join(tmp, "link.db")
os.symlink(db, link)
expect_error(["report", "--db", link, "--out", db],
             f"attntune: error: {db}: is the database ({link}); give another output path")
tune_db = os.path.join(store, "attntune_config.json")
expect_error(["tune", "--model", tiny, "--variants", "dense", "--seq-lens", "64", "--budget", "1",
              "--db", tune_db, "--out", store],
             f"attntune: error: {tune_db}: is the database ({tune_db}); give another output path")
alloc_db = os.path.join(store, "allocation.html")
expect_error(["allocate", "--model", tiny, "--rho", "0.5", "--context", "64", "--no-measure",
              "--db", alloc_db, "--out", store],
             f"attntune: error: {alloc_db}: is the database ({alloc_db}); give another output path")
with open(db, "rb") as f:
    expect(f.read() == stored, "the refused outputs left the database as it was")
expect(run("db", "info", "--db", db, check=0).returncode == 0, "the database still opens")
expect_error(["replay", "--cache", cache, "--budget", "2", "--report", cache],
             f"attntune: error: {cache}: is a --cache file ({cache}); give another output path")
expect(open(cache).read().startswith('{"tune_params_keys"'), "the cache file is kept")

# A path that is not UTF-8 (legal on Linux) in a stored or printed JSON: nlohmann's
# type_error 316 ended tune (its arguments' record), allocate and replay --json with
# "failed:", exit 1; a parameter value that is not UTF-8 the same way. Paths are written
# with U+FFFD in place of the bytes; a parameter is a word, refused in one line.
import subprocess
from clitest import ATTNTUNE


def run_bytes(*args):
    return subprocess.run([ATTNTUNE, *args], capture_output=True, timeout=600,
                          stdin=subprocess.DEVNULL)


odd = os.fsencode(tmp) + b"/m\xff.json"
with open(tiny, "rb") as f, open(odd, "wb") as g:
    g.write(f.read())
p = run_bytes("tune", "--model", odd, "--variants", "dense", "--seq-lens", "64", "--budget", "1",
              "--retime", "off", "--out", os.path.join(tmp, "odd-out"))
expect(p.returncode == 0, f"tune --model with a path that is not UTF-8: exit {p.returncode}, {p.stderr[-200:]!r}")
p = run_bytes("allocate", "--model", odd, "--rho", "0.5", "--context", "64", "--no-measure",
              "--out", os.path.join(tmp, "odd-alloc"))
expect(p.returncode == 0, f"allocate --model with a path that is not UTF-8: exit {p.returncode}, {p.stderr[-200:]!r}")
odd_cache = os.fsencode(tmp) + b"/c\xff.json"
with open(cache, "rb") as f, open(odd_cache, "wb") as g:
    g.write(f.read())
p = run_bytes("replay", "--cache", odd_cache, "--budget", "2", "--repeats", "2", "--json")
try:
    parsed = json.loads(p.stdout)
except ValueError:
    parsed = None
expect(p.returncode == 0 and parsed is not None,
       f"replay --json of a cache whose path is not UTF-8: exit {p.returncode}, {p.stderr[-200:]!r}")
for cmd in (["tune", "--variants", "lsh", "--out", tmp], ["bench", "--variant", "lsh"]):
    p = run_bytes(*cmd, "--params", b"rule=\xff")
    err = p.stderr.splitlines()
    expect(p.returncode == 2 and len(err) == 1 and err[0].startswith(b"attntune: error: --params: 'rule=")
           and err[0].endswith(b"' holds a character that is not printable ASCII (a parameter's name "
                               b"and value are integers or words)"),
           f"{cmd[0]} --params with a byte past ASCII: exit {p.returncode}, {p.stderr!r}")

# --help and --version succeed and say what attntune is.
p = run("--help", check=0)
expect("tune" in p.stdout and "bench" in p.stdout and "devices" in p.stdout, "--help lists the subcommands")
p = run("--version", check=0)
expect(p.stdout.startswith("attntune "), "--version prints the version")
p = run("devices", check=0)
expect(p.stdout.startswith("cpu: "), "devices names the CPU")
finish()
