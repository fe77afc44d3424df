#!/usr/bin/env python3
"""The libraries' grid as one table (scripts/gpu-checks.sh, step grid): per problem, each
implementation's best time from `attntune db records` (libraries.jsonl), PyTorch's SDPA
backends from torch_sdpa_grid.py (torch-grid.jsonl, dense and decode only), the tuned
entry, the fastest on the machine and the tuned entry's time over it, against the
targets of issue 20 (dense within 3%, swa and decode within 5%).

  libraries_table.py libraries.jsonl [torch-grid.jsonl]
"""
import json
import sys


def shape_fields(text):
    out = {}
    for item in text.split(","):
        if "=" in item:
            k, v = item.split("=", 1)
            out[k] = int(v) if v.lstrip("-").isdigit() else v
    return out


def main():
    recs = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
    torch = []
    if len(sys.argv) > 2:
        try:
            torch = [json.loads(line) for line in open(sys.argv[2]) if line.strip()]
        except OSError:
            pass
    problems = {}
    for r in recs:
        if r.get("status") != "ok":
            continue
        s = shape_fields(r["shape"])
        L = s.get("Lk", s.get("L"))
        vp = {k: v for k, v in r["params"].items() if k in ("w", "sink")}
        key = (r["variant"], r.get("phase", "prefill"), r["dtype"], s["Hq"], s["Hkv"], s["d"], L,
               json.dumps(vp, sort_keys=True))
        p = problems.setdefault(key, {"impls": {}, "tuned": None})
        p["impls"][r["implementation"]] = r["median_ms"]
        if r.get("tuned"):
            p["tuned"] = (r["implementation"], r["median_ms"])
    for t in torch:
        if "median_ms" not in t:
            continue
        key = ("dense", t["phase"], t["dtype"], t["Hq"], t["Hkv"], t["d"], t["L"], "{}")
        if key in problems:
            problems[key]["impls"]["torch-" + t["backend"]] = t["median_ms"]
    print("variant phase dtype Hq Hkv d L params | implementations (ms) | tuned | fastest | "
          "tuned/fastest | target")
    for key in sorted(problems):
        p = problems[key]
        if not p["tuned"]:
            continue
        fastest = min(p["impls"].items(), key=lambda kv: kv[1])
        ratio = p["tuned"][1] / fastest[1]
        limit = 1.03 if key[0] == "dense" and key[1] == "prefill" else 1.05
        impls = ", ".join("%s %.4f" % kv for kv in sorted(p["impls"].items()))
        print("%s %s %s %d %d %d %d %s | %s | %s %.4f | %s | %.3f | %s" % (
            *key, impls, p["tuned"][0], p["tuned"][1], fastest[0], ratio,
            "met" if ratio <= limit else "missed (limit %.2f)" % limit))


if __name__ == "__main__":
    main()
