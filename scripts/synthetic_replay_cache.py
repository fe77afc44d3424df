#!/usr/bin/env python3
"""Writes a synthetic Kernel Tuner cache file (docs/search.md, "Spaces no setting was
chosen on"): python3 scripts/synthetic_replay_cache.py SEED OUT.json.gz

Standard library only; the same seed writes the same file."""
# A synthetic Kernel Tuner cache: 8 parameters, a log-time model with main effects,
# pairwise interactions (a "threads per block" product), a slow tail and failures.
# Seeded; not derived from any of the five files.
import gzip, json, itertools, math, random, sys
seed = int(sys.argv[1]); out = sys.argv[2]
rng = random.Random(seed)
params = {
  "p0": [8, 16, 32, 64, 128, 256],
  "p1": [1, 2, 4, 8, 16],
  "p2": [1, 2, 3, 4, 6, 8],
  "p3": [1, 2, 4],
  "p4": [0, 1],
  "p5": [0, 1],
  "p6": [1, 2, 4, 8],
  "p7": [0, 1, 2],
}
keys = list(params)
main = {k: {v: rng.gauss(0, 0.35) for v in vals} for k, vals in params.items()}
pairs = [(a, b) for a, b in itertools.combinations(keys, 2) if rng.random() < 0.25]
inter = {(a, b): {(x, y): rng.gauss(0, 0.25) for x in params[a] for y in params[b]} for a, b in pairs}
best_threads = rng.choice([64, 128, 256])
cache = {}
for combo in itertools.product(*params.values()):
    c = dict(zip(keys, combo))
    threads = c["p0"] * c["p1"]
    if threads > 1024 or threads < 16:
        continue  # constraint: not in the space
    lt = sum(main[k][c[k]] for k in keys) + sum(inter[(a, b)][(c[a], c[b])] for a, b in pairs)
    lt += 0.6 * abs(math.log2(threads / best_threads))  # occupancy-like bowl in the product
    lt += 1.5 * max(0.0, c["p2"] * c["p3"] * c["p6"] / 16 - 1)  # register spill: slow tail
    t = math.exp(lt)
    key = ",".join(str(v) for v in combo)
    if c["p2"] * c["p3"] * c["p6"] > 96 and rng.random() < 0.5:
        cache[key] = dict(c, time="CompilationFailedConfig", times=[], compile_time=500.0,
                          benchmark_time=0.0, framework_time=1.0, verification_time=0.0)
    else:
        cache[key] = dict(c, time=t, times=[t] * 7, compile_time=500.0, benchmark_time=7 * t * 50,
                          framework_time=1.0, verification_time=0.0)
doc = {"device_name": "synthetic-%d" % seed, "kernel_name": "synthetic", "problem_size": [1],
       "tune_params_keys": keys, "tune_params": params, "objective": "time", "cache": cache}
json.dump(doc, gzip.open(out, "wt"))
ok = [v["time"] for v in cache.values() if not isinstance(v["time"], str)]
ok.sort()
print(out, len(cache), "invalid", len(cache) - len(ok), "median/opt", ok[len(ok)//2] / ok[0],
      "within 0.95:", sum(1 for t in ok if ok[0] / t >= 0.95))
