#!/usr/bin/env python3
"""The A/B table of gpu-checks.sh's sparse step, from SPARSE_AB_JSONL: bench --json
records, one per line, each with "build" (a base's label, or "new"). BUILD... names the
builds in the order the table shows them (the oldest first, "new" last). One row per
configuration: each build's end-to-end median and select_ms, and every kernel whose time
moved by 2 us or more from one build to the next.

    scripts/ab_table.py SPARSE_AB_JSONL BUILD... new
"""
import json
import sys


def kernels(record):
    out = {}
    for k in record.get("kernels", []):
        out[k["name"]] = out.get(k["name"], 0.0) + k["ms"]
    return out


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
                ta, tb = ka.get(name, 0.0), kb.get(name, 0.0)
                if abs(ta - tb) >= 0.002:
                    moved.append("%s %s %.4f -> %s %.4f" % (name.split("::")[-1], a, ta, b, tb))
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
