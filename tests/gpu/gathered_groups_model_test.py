#!/usr/bin/env python3
"""scripts/gathered_groups_model.py: the kernel's order as modelled has no finding, and
each mutation (a wait one group short, a key ring of STAGES slots, no barrier at the end
of a step) is found, read-after-write and write-after-read both."""
import os
import subprocess
import sys

script = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "gathered_groups_model.py")
failures = []


def run(*args):
    r = subprocess.run([sys.executable, script, *args], capture_output=True, text=True)
    return r.returncode, r.stdout


rc, out = run()
if rc != 0 or "0 of 48 configurations with findings" not in out:
    failures.append("the kernel's order: rc %d, %s" % (rc, out.strip()[-200:]))
for mutation, finding in [("wait", "addressed from keys not landed"),
                          ("ring", "keys slot"), ("barrier", "kv slot")]:
    rc, out = run("--mutate", mutation)
    if rc != 1 or finding not in out or "0 of 48" in out:
        failures.append("--mutate %s: rc %d, no '%s' in %s" % (mutation, rc, finding,
                                                                 out.strip()[-200:]))
rc, _ = run("--mutate", "nothing")
if rc != 2:
    failures.append("an unknown mutation: rc %d, not 2" % rc)

for f in failures:
    print("FAIL:", f)
print("%d failures" % len(failures))
sys.exit(1 if failures else 0)
