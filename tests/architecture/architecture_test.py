#!/usr/bin/env python3
"""The module boundaries of docs/architecture.md, checked on the sources.

tuner/, search/, db/ and reports/ see a backend only through backends/backend.h: none
includes a header of a backend, of a platform's kernels or profiler, or of CUDA/CUPTI or
MPI, links a backend-specific library or MPI, or names a platform. MPI stays in
parallel/'s sources: no header of parallel/ includes it, nor does cli/. core/ depends on
nothing of attntune's. library/ sits over kernels/ and core/ (and profiler/device.h for
device names), never over tuner/, search/, db/, reports/, cli/, parallel/ or backends/;
its public headers (library/include/attntune/) include the standard library and each
other only (the CUDA component's header also cuda_runtime_api.h). The attention
libraries (cuDNN, FlashInfer) are named in kernels/ and backends/ only. Exits 1 naming
every violation."""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

NEUTRAL = ["tuner", "search", "db", "reports"]
# Headers a neutral module must not include (the platform-specific parts of the tree and
# the vendor headers).
FORBIDDEN_INCLUDE = re.compile(
    r'#\s*include\s*[<"]('
    r"kernels/kokkos/|kernels/cuda/|profiler/cuda/|backends/(?!backend\.h)|"
    r"cuda|cupti|nvtx|cudnn|Kokkos|mpi\.h|parallel/)")
# Libraries a neutral module must not link.
FORBIDDEN_LINK = re.compile(r"\b(kernels_gpu|kernels_cuda\w*|kernels_cudnn\w*|profiler_cuda|"
                            r"profiler_cupti|backend_(?!api)\w+|CUDA::\w+|attntune_kokkos|MPI::\w+|"
                            r"parallel)\b")
# Names of platforms: the neutral modules never ask which backend runs.
FORBIDDEN_NAME = re.compile(r"\b(kCudaPlatform|kKokkosPlatform|ATTNTUNE_HAVE_CUDA|"
                            r"ATTNTUNE_HAVE_CUPTI|ATTNTUNE_HAVE_MPI)\b")
# MPI's header: only parallel/'s sources include it.
MPI_INCLUDE = re.compile(r'#\s*include\s*[<"]mpi\.h[>"]')
# The attention libraries (cuDNN, FlashInfer) are named in kernels/ and backends/ (and the
# build's cmake/) alone: every other module, cli/ and library/ included, reaches them
# through the variant table.
LIBRARY_NAME = re.compile(r"\b(\w*cudnn\w*|\w*CUDNN\w*|\w*flashinfer\w*|\w*FLASHINFER\w*)\b")
LIBRARY_FREE = ["core", "profiler", "tuner", "search", "db", "reports", "cli", "library",
                "parallel"]
CORE_INCLUDE = re.compile(r'#\s*include\s*"(?!core/)[a-z_]+/')
# What library/ may include of attntune's: its own files, kernels/, core/, the device
# names of profiler/, and the generated build_info.h.
LIBRARY_INCLUDE = re.compile(
    r'#\s*include\s*["<](?!(?:library/|kernels/|core/|profiler/device\.h|attntune/|build_info\.h))'
    r'(tuner|search|db|reports|cli|backends|parallel|profiler|library|fuzz|tests|python)/')
# A public header: <standard> headers, "attntune/..." headers, and CUDA's runtime API.
PUBLIC_INCLUDE = re.compile(r'#\s*include\s*(["<])([^">]+)[">]')
STANDARD_HEADER = re.compile(r"^[a-z_0-9]+(\.h)?$")


def sources(folder):
    for dirpath, _, files in os.walk(os.path.join(ROOT, folder)):
        for name in sorted(files):
            if name.endswith((".h", ".cpp", ".cuh", ".cu")) or name == "CMakeLists.txt":
                yield os.path.join(dirpath, name)


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return "\n".join(line.split("//")[0] if not line.lstrip().startswith("#") else line
                     for line in text.splitlines())


def main():
    problems = []
    for folder in NEUTRAL:
        for path in sources(folder):
            rel = os.path.relpath(path, ROOT)
            with open(path, encoding="utf-8") as f:
                raw = f.read()
            if path.endswith("CMakeLists.txt"):
                code = "\n".join(l.split("#")[0] for l in raw.splitlines())
                for m in FORBIDDEN_LINK.finditer(code):
                    problems.append(f"{rel}: links {m.group(1)}")
                continue
            code = strip_comments(raw)
            for m in FORBIDDEN_INCLUDE.finditer(code):
                problems.append(f"{rel}: includes {m.group(0).split(None, 1)[-1]}")
            for m in FORBIDDEN_NAME.finditer(code):
                problems.append(f"{rel}: names {m.group(1)}")
    for folder in ["parallel", "cli"]:
        for path in sources(folder):
            rel = os.path.relpath(path, ROOT)
            if folder == "parallel" and path.endswith(".cpp"):
                continue
            with open(path, encoding="utf-8") as f:
                code = strip_comments(f.read())
            for m in MPI_INCLUDE.finditer(code):
                problems.append(f"{rel}: includes mpi.h (only parallel/'s sources may)")
    for folder in LIBRARY_FREE:
        for path in sources(folder):
            rel = os.path.relpath(path, ROOT)
            with open(path, encoding="utf-8") as f:
                raw = f.read()
            if path.endswith("CMakeLists.txt"):
                code = "\n".join(l.split("#")[0] for l in raw.splitlines())
            else:
                code = strip_comments(raw)
            for m in LIBRARY_NAME.finditer(code):
                problems.append(f"{rel}: names the attention library {m.group(1)}")
    for path in sources("core"):
        rel = os.path.relpath(path, ROOT)
        with open(path, encoding="utf-8") as f:
            code = f.read()
        for m in CORE_INCLUDE.finditer(code):
            problems.append(f"{rel}: core/ includes {m.group(0).split(None, 1)[-1]}")
    for path in sources("library"):
        rel = os.path.relpath(path, ROOT)
        if path.endswith("CMakeLists.txt"):
            continue
        with open(path, encoding="utf-8") as f:
            code = strip_comments(f.read())
        if "/include/attntune/" in path:
            for m in PUBLIC_INCLUDE.finditer(code):
                name = m.group(2)
                ok = (name.startswith("attntune/") or name == "cuda_runtime_api.h" and
                      rel.endswith("attntune_cuda.h") or
                      m.group(1) == "<" and STANDARD_HEADER.match(name) and "/" not in name)
                if not ok:
                    problems.append(f"{rel}: a public header includes {m.group(0).split(None, 1)[-1]}")
            continue
        for m in LIBRARY_INCLUDE.finditer(code):
            problems.append(f"{rel}: library/ includes {m.group(0).split(None, 1)[-1]}")
    for p in problems:
        print("FAIL:", p)
    checked = sum(1 for folder in NEUTRAL + ["core", "library"] for _ in sources(folder))
    print(f"architecture: {checked} files checked, {len(problems)} violation(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
