#!/usr/bin/env python3
"""scripts/ab_table.py on fabricated bench records: a selection phase's fp32 and fp16
kernels, as bench names them, are one row entry with their types; other kernels by name."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
from ab_table import kernel_phase, rows  # noqa: E402

failures = []


def expect(cond, what):
    if not cond:
        failures.append(what)


for name, want in [
        ("attntune::select::ks_scores", ("ks_scores", "f32")),
        ("attntune::select::ks_scores_f16", ("ks_scores", "f16")),
        ("attntune::select::lsh_bins_wide_bf16", ("lsh_bins_wide", "bf16")),
        ("attntune_select_decode_chosen_f16", ("decode_chosen", "f16")),
        ("attntune::select::topk_chunks", ("topk_chunks", "")),
        ("attntune::select::cub", ("cub", "")),
        ("attntune_blocksparse_f16_d128_br128_bc32_w4_s2",
         ("attntune_blocksparse_f16_d128_br128_bc32_w4_s2", ""))]:
    expect(kernel_phase(name) == want, "%s: %s, not %s" % (name, kernel_phase(name), want))


def record(build, scores_name, scores_ms, kernel_ms):
    return {"build": build, "variant": "ks", "params": {"k": 64}, "status": "ok",
            "median_ms": scores_ms + kernel_ms + 0.05, "select_ms": scores_ms + 0.05,
            "kernels": [{"name": scores_name, "ms": scores_ms},
                        {"name": "attntune::select::topk_chunks", "ms": 0.05},
                        {"name": "attntune_blocksparse_f16", "ms": kernel_ms}]}


out = rows([record("base", "attntune::select::ks_scores", 0.074, 0.11),
            record("new", "attntune::select::ks_scores_f16", 0.040, 0.11)], ["base", "new"])
expect(len(out) == 1, "one row: %s" % out)
moved = out[0].split(" | ")[-1] if out else ""
expect(moved == "ks_scores [f32 -> f16] base 0.0740 -> new 0.0400",
       "the scores' two forms as one phase: %r" % moved)
expect("topk_chunks" not in moved and "blocksparse" not in moved, "unmoved kernels: %r" % moved)

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("ab_table: ok")
