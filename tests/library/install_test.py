"""The installed package end to end, as a user gets it (issue 22):

1. `attntune tune` on a tiny model (dense, swa, hybrid, ks, dma, hax at L=512) writes
   attntune_config.h and attntune_config.json;
2. `cmake --install` puts libattntune (shared and static), the headers, the CLI, the CMake
   package and attntune.pc into a temporary prefix;
3. examples/consumer is configured against that prefix alone, built (shared, then static)
   and run: each variant's tuned entry on its own inputs, against its fp64 loop
   (rel_err < 1e-5), the JSON read at run time naming the same configuration; nothing
   of the build tree is in its build or its binary;
4. a C program built with pkg-config runs through the C ABI;
5. the JSON of another device, another attntune version or another schema is refused in one line;
6. the Python binding, built by pip (scikit-build-core) over the installed library, gives
   the C++ outputs bit for bit and matches numpy (tests/library/binding_test.py).
Each step's time is printed."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "cli"))
from clitest import ATTNTUNE, FIXTURES, expect, fail, finish  # noqa: E402

BUILD = os.environ["ATTNTUNE_BUILD_DIR"]
SOURCE = os.environ["ATTNTUNE_SOURCE_DIR"]
CMAKE = os.environ.get("CMAKE_COMMAND", "cmake")
CC = os.environ.get("ATTNTUNE_C_COMPILER", "cc")
SANITIZE = os.environ.get("ATTNTUNE_SANITIZE") == "ON"  # a -DATTNTUNE_SANITIZE=ON build
tmp = tempfile.mkdtemp(prefix="attntune_install_")
times = []


def step(name, args, env=None, cwd=None, check=0, timeout=600):
    t0 = time.monotonic()
    p = subprocess.run(args, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout,
                       stdin=subprocess.DEVNULL)
    took = time.monotonic() - t0
    times.append((name, took))
    print(f"[{took:6.1f} s] {name}", flush=True)
    if check is not None and p.returncode != check:
        fail(f"{name}: exit {p.returncode}, expected {check}\nstdout: {p.stdout[-4000:]}\n"
             f"stderr: {p.stderr[-4000:]}")
        finish()
    return p


# 1. A real tune of the six variants on the example's geometry.
tuned = os.path.join(tmp, "tuned")
tiny = os.path.join(FIXTURES, "models/tiny/config.json")
step("attntune tune (6 variants, L=512)",
     [ATTNTUNE, "tune", "--model", tiny, "--variants", "dense,swa,hybrid,ks,dma,hax",
      "--seq-lens", "512", "--budget", "2", "--strategy", "random", "--generic", "off",
      # seed 4 tries w, k < 500 for every sparse variant (the loop's selections get used)
      "--seed", "4", "--max-seconds", "0.1", "--out", tuned])
config_json = os.path.join(tuned, "attntune_config.json")
with open(config_json) as f:
    tuned_doc = json.load(f)
expect({e["variant"] for e in tuned_doc["entries"]} == {"dense", "swa", "hybrid", "ks", "dma", "hax"},
       "the tune has an entry for each of the six variants")

# 2. Install into a fresh prefix.
prefix = os.path.join(tmp, "prefix")
step("cmake --install", [CMAKE, "--install", BUILD, "--prefix", prefix])
libdir = os.path.join(prefix, "lib")
for rel in ["bin/attntune", "include/attntune/attntune.h", "include/attntune/attntune_c.h",
            "lib/libattntune.a", "lib/cmake/attntune/attntuneConfig.cmake",
            "lib/pkgconfig/attntune.pc"]:
    expect(os.path.exists(os.path.join(prefix, rel)), f"installed {rel}")
expect(any(n.startswith("libattntune.so") for n in os.listdir(libdir)), "installed libattntune.so")
p = step("installed attntune --version", [os.path.join(prefix, "bin/attntune"), "--version"])
expect(p.stdout.startswith("attntune "), f"the installed CLI runs: {p.stdout.strip()}")


def without_debug_info(path, data):
    """The bytes of `path` without its debug sections where it is an ELF file or archive:
    a build with -g (RelWithDebInfo, the sanitizer build) records its compile directories
    there, which is what a debugger needs and no loader or build reads."""
    if not (data.startswith(b"\x7fELF") or data.startswith(b"!<arch>")):
        return data
    with tempfile.TemporaryDirectory() as d:
        stripped = os.path.join(d, "stripped")
        p = subprocess.run(["objcopy", "--strip-debug", path, stripped], capture_output=True)
        if p.returncode != 0:
            return data
        with open(stripped, "rb") as f:
            return f.read()


def names_build_tree(data, build):
    """Whether `data` names the build tree. In a sanitizer build a name that is a whole
    source file's path (a file generated into the build tree) is passed over: AddressSanitizer's
    descriptor of a file's globals holds its path as the compiler was given it (GCC 12 does
    not remap it with -ffile-prefix-map), which only the sanitizer's reports read."""
    for m in re.finditer(re.escape(build.encode()) + rb"[^\x00]*", data):
        if SANITIZE and re.fullmatch(rb"[^\x00]*\.(cpp|cc|c)", m.group(0)):
            continue
        return True
    return False


def no_build_tree(paths, what):
    """Fails when any file under `paths` names the build tree of this attntune (outside
    debug information)."""
    build = os.path.realpath(BUILD)
    hits = []
    for root in paths:
        for dirpath, _, files in os.walk(root):
            for name in files:
                path = os.path.join(dirpath, name)
                try:
                    with open(path, "rb") as f:
                        data = f.read()
                    if build.encode() in data and names_build_tree(without_debug_info(path, data), build):
                        hits.append(path)
                except OSError:
                    pass
    expect(not hits, f"{what} names nothing of the build tree {build}: {hits[:5]}")


no_build_tree([prefix], "the installed prefix")


# 3. The consumer against the installed package only.
def build_consumer(name, extra):
    out = os.path.join(tmp, name)
    step(f"configure {name}", [CMAKE, "-S", os.path.join(SOURCE, "examples/consumer"), "-B", out,
                               "-DCMAKE_BUILD_TYPE=Release", f"-DCMAKE_PREFIX_PATH={prefix}",
                               f"-DATTNTUNE_CONFIG_DIR={tuned}", *extra])
    step(f"build {name}", [CMAKE, "--build", out])
    no_build_tree([out], f"{name}'s build folder and binary")
    return os.path.join(out, "consumer")


npy = os.path.join(tmp, "npy")
os.makedirs(npy)
consumer = build_consumer("consumer", [])
p = step("consumer (shared): 6 variants vs fp64 loop, JSON lookup", [consumer, "--seq-len", "500",
                                                                     "--json", config_json,
                                                                     "--out", npy])
print(p.stdout)
expect("6 passed, 0 failed" in p.stdout, "the consumer's six tuned runs match the fp64 loop")
for variant in ["dense", "swa", "hybrid", "ks", "dma", "hax"]:
    line = next((l for l in p.stdout.splitlines() if l.startswith(variant + " ")), "")
    expect(line.endswith(" ok") and float(line.split("rel_err")[1].split()[0]) < 1e-5,
           f"{variant}: rel_err < 1e-5 ({line.strip()})")
ldd = subprocess.run(["ldd", consumer], capture_output=True, text=True).stdout
expect(os.path.realpath(libdir) in ldd or libdir in ldd, f"the consumer loads libattntune from the prefix:\n{ldd}")

static = build_consumer("consumer-static", ["-DCONSUMER_STATIC=ON"])
p = step("consumer (static)", [static, "--seq-len", "500"])
expect("6 passed, 0 failed" in p.stdout, "the statically linked consumer matches too")
ldd = subprocess.run(["ldd", static], capture_output=True, text=True).stdout
expect("libattntune" not in ldd, "the static consumer needs no libattntune.so")

# 4. C, through pkg-config.
env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(libdir, "pkgconfig"))
flags = subprocess.run(["pkg-config", "--cflags", "--libs", "attntune"], env=env,
                       capture_output=True, text=True).stdout.split()
c_program = os.path.join(tmp, "c_consumer")
step("cc c_consumer.c (pkg-config)", [CC, "-std=c11", "-Wall", "-Wextra", "-Werror",
                                      os.path.join(SOURCE, "tests/library/c_consumer.c"), "-o",
                                      c_program, *flags, f"-Wl,-rpath,{libdir}", "-lm"])
p = step("c_consumer", [c_program])
expect(p.stdout.strip().endswith("ok"), f"the C program ran dense through the C ABI: {p.stdout.strip()}")


# 5. Another device, version or schema: one line, exit 2.
def refused(name, mutate, expected):
    doc = json.loads(json.dumps(tuned_doc))
    mutate(doc)
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        json.dump(doc, f)
    p = step(f"consumer --json {name}", [consumer, "--json", path], check=2)
    expect(p.stderr == expected.replace("PATH", path) + "\n",
           f"{name} refused in one line: {p.stderr.strip()}")


this_cpu = tuned_doc["entries"][0]["device"]
version = tuned_doc["tool_version"]
dense = next(e for e in tuned_doc["entries"] if e["variant"] == "dense")
entry = f"entry dense prefill d=32 L={dense['seq_len']}"
refused("other_device.json",
        lambda d: [e.update(device="Other CPU") for e in d["entries"]],
        f"attntune: error: PATH: {entry}: tuned on 'Other CPU', this is '{this_cpu}' (cpu) (tune on "
        "this device, or allow_other_device to use it with a warning)")
refused("other_version.json", lambda d: d.update(tool_version="0.0.1"),
        f"attntune: error: PATH: {entry}: written by attntune 0.0.1, this is attntune {version} "
        "(emit it again with this version, or allow_other_version to use it with a warning)")
refused("other_schema.json", lambda d: d.update(schema=2),
        f"attntune: error: PATH: schema 2 is not the format this attntune reads (schema 1); emit it "
        f"again with attntune {version} (attntune emit --db FILE)")

# 6. The Python binding: built by pip over the installed library, then checked.
try:
    import scikit_build_core  # noqa: F401
    have_skbuild = True
except ImportError:
    have_skbuild = False
    fail("scikit-build-core is missing (scripts/install-deps.sh --test installs it)")
if have_skbuild:
    site = os.path.join(tmp, "site")
    # The binding alone over the installed libattntune (ATTNTUNE_PYTHON_PREFIX): CMake
    # builds one module, not the library again.
    settings = [f"--config-settings=cmake.define.ATTNTUNE_PYTHON_PREFIX={prefix}",
                f"--config-settings=build-dir={os.path.join(tmp, 'pybuild')}"]
    if shutil.which("ccache"):
        settings.append("--config-settings=cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache")
    step("pip install . (binding over the installed library)",
         [sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "--quiet",
          "--disable-pip-version-check", "--target", site, *settings, SOURCE])
    env = dict(os.environ, PYTHONPATH=site, PYTHONDONTWRITEBYTECODE="1")
    if SANITIZE:
        # A sanitizer build's library needs the runtime first in the process, which the
        # Python interpreter does not link: preloaded, with libstdc++ (whose __cxa_throw
        # the runtime looks up when it starts); the interpreter's own allocations at exit
        # are not leaks of attntune's.
        def lib(name):
            return subprocess.run([CC, f"-print-file-name={name}"], capture_output=True,
                                  text=True).stdout.strip()
        env.update(LD_PRELOAD=f"{lib('libasan.so')} {lib('libstdc++.so')}",
                   ASAN_OPTIONS="detect_leaks=0")
    p = step("binding_test.py", [sys.executable,
                                 os.path.join(SOURCE, "tests/library/binding_test.py"), npy,
                                 config_json, os.path.join(tmp, "other_device.json")],
             env=env, check=None)
    print(p.stdout, p.stderr)
    expect(p.returncode == 0, "the binding's checks passed")

print("times:", ", ".join(f"{n} {t:.1f} s" for n, t in times))
print(f"total {sum(t for _, t in times):.1f} s")
shutil.rmtree(tmp, ignore_errors=True)
finish()
