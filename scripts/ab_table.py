#!/usr/bin/env python3
"""The A/B table of gpu-checks.sh's sparse step, from SPARSE_AB_JSONL: bench --json
records, one per line, each with "build" (a base's label, or "new"). BUILD... names the
builds in the order the table shows them (the oldest first, "new" last). One row per
configuration: each build's end-to-end median and select_ms, and every kernel whose time
moved by 2 us or more from one build to the next. A selection kernel is compared with its
other element types' forms (`attntune_select_ks_scores` and `..._f16`: the one phase
reading fp32 copies in one build and fp16 tensors in the other), its types shown.

    scripts/ab_table.py SPARSE_AB_JSONL BUILD... new
"""
import json
import sys


# The selection's phases that read q, k or v, one kernel per element type (fp32 copies,
# or the kernels' fp16/bf16 tensors in place: select.cu's ATTNTUNE_SELECT_KERNELS).
TYPED_PHASES = ("ks_chunk_sums", "ks_scores", "dma_scores", "lsh_bins", "lsh_bins_wide",
                "decode_chosen")


def kernel_phase(name):
    """(the kernel's short name, its element type: f32, f16 or bf16 for a typed selection
    kernel, else ""). Bench names a selection kernel attntune::select::<phase>[_f16|_bf16],
    the launch attntune_select_<phase>[_f16|_bf16]; the short name drops the type."""
    for prefix in ("attntune::select::", "attntune_select_"):
        if name.startswith(prefix):
            phase = name[len(prefix):]
            for suffix in ("_f16", "_bf16"):
                if phase.endswith(suffix) and phase[: -len(suffix)] in TYPED_PHASES:
                    return phase[: -len(suffix)], suffix[1:]
            return phase, "f32" if phase in TYPED_PHASES else ""
    return name.split("::")[-1], ""


def kernels(record):
    """{phase: (ms summed over its launches, its element types joined by '+')}."""
    ms, types = {}, {}
    for k in record.get("kernels", []):
        phase, dtype = kernel_phase(k["name"])
        ms[phase] = ms.get(phase, 0.0) + k["ms"]
        if dtype:
            types.setdefault(phase, set()).add(dtype)
    return {p: (t, "+".join(sorted(types.get(p, ())))) for p, t in ms.items()}


def rows(records, builds):
    by_config = {}
    for r in records:
        key = (r["variant"], json.dumps(r["params"], sort_keys=True))
        by_config.setdefault(key, {})[r["build"]] = r
    out = []
    for (variant, params), by in by_config.items():
        have = [b for b in builds if b in by and by[b].get("status", "ok") == "ok"]
        if len(have) < 2:
            continue
        moved = []
        for a, b in zip(have, have[1:]):
            ka, kb = kernels(by[a]), kernels(by[b])
            for name in sorted(set(ka) | set(kb)):
                (ta, da), (tb, db) = ka.get(name, (0.0, "")), kb.get(name, (0.0, ""))
                if abs(ta - tb) >= 0.002:
                    types = " [%s -> %s]" % (da or "-", db or "-") if da != db else ""
                    moved.append("%s%s %s %.4f -> %s %.4f" % (name, types, a, ta, b, tb))
        out.append("%s %s (%s) | %s | %s | %s" % (
            variant, params, ", ".join(have),
            " -> ".join("%.4f" % by[b]["median_ms"] for b in have),
            " -> ".join("%.4f" % by[b].get("select_ms", 0.0) for b in have),
            "; ".join(moved)))
    return out


def main(argv):
    if len(argv) < 4:
        print("usage: ab_table.py SPARSE_AB_JSONL BUILD... new", file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        records = [json.loads(line) for line in f if line.strip()]
    builds = argv[2:]
    print("A/B (each base right after the new build, same card): variant params (builds) | "
          "end to end ms %s | select_ms | kernels that moved by 2 us or more"
          % " -> ".join(builds))
    for row in rows(records, builds):
        print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
