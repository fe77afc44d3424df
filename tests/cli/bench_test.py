"""attntune bench --json: the fields the foundation issue names, checked against counts
computed here; --unchecked times without the reference and says so."""
import json
import os

from clitest import run, expect, finish

# swa w=8, sink=2 on L=40, Hq=4: per row the window plus the sinks not already in it.
L, w, sink, Hq, d = 40, 8, 2, 4, 64
pairs = Hq * sum(len(set(range(max(0, i - w + 1), i + 1)) | set(range(min(sink, i + 1))))
                 for i in range(L))
dense_pairs = Hq * L * (L + 1) // 2

p = run("bench", "--variant", "swa", "--params", f"w={w},sink={sink}", "--shape",
        f"B=1,Hq={Hq},Hkv=2,L={L},d={d}", "--max-seconds", "0.2", "--json", check=0)
j = json.loads(p.stdout)
for key in ["median_ms", "useful_flops", "gflops", "pairs", "rel_err", "mass_recall"]:
    expect(key in j, f"bench JSON has {key}")
expect(j["status"] == "ok" and j["median_ms"] > 0, "bench measured a time")
expect(j["pairs"] == pairs, f"pairs {j['pairs']} == {pairs} counted here")
expect(j["useful_flops"] == 4 * d * pairs, "useful_flops = 4 d pairs")
expect(abs(j["pair_ratio"] - pairs / dense_pairs) < 1e-12, "pair_ratio against dense")
expect(abs(j["gflops"] - j["useful_flops"] / (j["median_ms"] * 1e6)) < 1e-9 * j["gflops"],
       "gflops = useful_flops / median time")
expect(0 < j["mass_recall"] < 1 and j["rel_err"] > 1e-3, "a window of 8 loses some dense mass")
expect(j["check_err"] < 1e-5, "the kernel matched its fp64 reference")

p = run("bench", "--variant", "dense", "--shape", f"B=1,Hq={Hq},Hkv=2,L={L},d={d}",
        "--max-seconds", "0.2", "--unchecked", "--json", check=0)
j = json.loads(p.stdout)
expect(j["checked"] == 0 and "rel_err" not in j and "mass_recall" not in j and "check_err" not in j,
       "--unchecked reports no quality it did not compute")
expect(j["pairs"] == dense_pairs and j["pair_ratio"] == 1.0, "--unchecked still counts pairs")

# attntune variants: every row of the table, each with what runs it on the CPU.
p = run("variants", check=0)
for v in ["dense", "swa", "hybrid", "lsh", "ks", "hax", "dma", "dma_decode"]:
    expect(f"\n{v}: " in "\n" + p.stdout, f"variants lists {v}")
expect(p.stdout.count("kokkos prefill fp32: ") == 8, "every variant runs on the CPU in prefill")

# FlashInfer: dense and swa on CUDA in both phases, fp16 and bf16, when its headers were
# found at configure time; otherwise listed as not built, with the reason.
def rows_of(variant):
    """The variant's lines '  PLATFORM PHASE DTYPE: ids' (up to the next variant)."""
    rows = []
    for line in ("\n" + p.stdout).split(f"\n{variant}: ")[1].split("\n")[1:]:
        if not line.startswith("  "):
            break
        if not line.startswith("  params"):
            rows.append(line)
    return rows

if os.environ.get("ATTNTUNE_HAVE_FLASHINFER") == "ON":
    for v in ["dense", "swa"]:
        for phase in ["prefill", "decode"]:
            for dtype in ["fp16", "bf16"]:
                line = [l for l in rows_of(v) if l.startswith(f"  cuda {phase} {dtype}:")]
                expect(len(line) == 1 and "flashinfer" in line[0].split(": ")[1].split(", "),
                       f"variants lists flashinfer for {v} {phase} {dtype}: {line}")
    for v in ["hybrid", "lsh", "ks", "hax", "dma", "dma_decode"]:
        expect(all("flashinfer" not in l for l in rows_of(v)), f"no flashinfer entry for {v}")
    expect(" flashinfer: " not in p.stdout.split("not built in this attntune:")[-1]
           if "not built in this attntune:" in p.stdout else True, "flashinfer is not listed absent")
else:
    # The reason cmake/attention_libraries.cmake gave (or, without CUDA kernels, that one).
    reasons = [os.environ.get("ATTNTUNE_FLASHINFER_ABSENT", ""),
               "this attntune was built without the CUDA toolkit"]
    expect(any(f"\n  cuda flashinfer: {r}\n" in p.stdout for r in reasons if r),
           "variants says why flashinfer is not built")

# A floor of repetitions above the default ceiling (100) runs them all, not an abort.
p = run("bench", "--variant", "dense", "--shape", "B=1,Hq=2,Hkv=1,L=16,d=64",
        "--min-reps", "101", "--max-seconds", "0.01", "--json", check=0)
j = json.loads(p.stdout)
expect(j["status"] == "ok" and j["samples"] >= 101, f"--min-reps 101 gives {j['samples']} samples")
finish()
