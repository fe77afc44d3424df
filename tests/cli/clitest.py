"""Helpers shared by the CLI integration tests: run attntune, assert on the result."""
import os
import subprocess
import sys

ATTNTUNE = os.environ.get("ATTNTUNE", "attntune")
FIXTURES = os.environ.get("ATTNTUNE_FIXTURES", "")

failures = []


def run(*args, timeout=600, check=None):
    """Runs attntune with args; returns CompletedProcess (text)."""
    p = subprocess.run([ATTNTUNE, *args], capture_output=True, text=True, timeout=timeout,
                       stdin=subprocess.DEVNULL)
    if check is not None and p.returncode != check:
        fail(f"attntune {' '.join(args)}: exit {p.returncode}, expected {check}\n"
             f"stdout: {p.stdout}\nstderr: {p.stderr}")
    return p


def fail(message):
    failures.append(message)
    print("FAIL:", message, flush=True)


def expect(cond, message):
    if not cond:
        fail(message)
    else:
        print("ok:", message.splitlines()[0], flush=True)


def finish():
    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)
    print("all checks passed")
