#!/usr/bin/env bash
# Installs what attntune needs on a fresh Debian bookworm machine: the build tool
# chain and libraries (Debian packages; Open MPI for tunes on several ranks, which a
# build without it skips), and with --test what the tests use
# (headless Chromium; clang for the libFuzzer targets; numpy and safetensors for the
# independent fp64 checks; python3-dev, pybind11-dev, libdlpack-dev and scikit-build-core
# for the Python binding, which the library's install test builds with pip; torch and
# transformers for scripts/capture_qkv.py's tests, which run small randomly initialised
# models on the CPU: torch from PyPI brings its CUDA libraries too, about 4 GB). Where
# the CUDA toolkit is (nvcc), with or without --test: the cuDNN frontend's headers
# (nvidia-cudnn-frontend, a few MB) and, unless the toolkit already holds cuDNN's headers,
# cuDNN itself (nvidia-cudnn-cu13, about 0.9 GB), so that cuDNN's SDPA is built in
# (libcudnn is loaded at run time, never linked); and FlashInfer's headers
# (flashinfer-python 0.7.2.post1 without its dependencies: header-only kernels with the
# CUTLASS and CCCL they need, about 0.5 GB unpacked), so that its kernels are built in.
set -euo pipefail

want_tests=0
[ "${1:-}" = "--test" ] && want_tests=1

packages=(g++ cmake make pkg-config libsqlite3-dev sqlite3 nlohmann-json3-dev libcli11-dev
          libtrilinos-kokkos-dev libjs-chart.js libeigen3-dev zlib1g-dev catch2
          libopenblas-dev libssl-dev libopenmpi-dev openmpi-bin)
[ "$want_tests" = 1 ] && packages+=(chromium python3 clang python3-dev pybind11-dev libdlpack-dev)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
if [ "${#missing[@]}" -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${missing[@]}"
fi

if [ "$want_tests" = 1 ]; then
  if ! python3 -c "import numpy, safetensors, scikit_build_core, torch, transformers" 2>/dev/null; then
    echo "install-deps: installing numpy, safetensors, scikit-build-core, torch and transformers from PyPI"
    if ! python3 -m pip --version >/dev/null 2>&1; then
      DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q python3-pip
    fi
    pip=(python3 -m pip install --quiet --disable-pip-version-check numpy safetensors
         scikit-build-core torch transformers)
    # Debian's own python3 refuses installs outside a venv (PEP 668); the test tools
    # only need these packages, so allow it there.
    "${pip[@]}" || "${pip[@]}" --break-system-packages
  fi
fi

# cuDNN's SDPA and FlashInfer (cmake/attention_libraries.cmake finds them in python3's
# site-packages).
nvcc_bin=$(command -v nvcc || true)
[ -z "$nvcc_bin" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc_bin=/usr/local/cuda/bin/nvcc
if [ -n "$nvcc_bin" ]; then
  cuda_include=$(dirname "$(dirname "$(readlink -f "$nvcc_bin")")")/include
  cudnn_pkgs=()
  python3 -c "import os, sys, sysconfig; p = sysconfig.get_paths(); sys.exit(0 if any(os.path.exists(os.path.join(p[k], 'include', 'cudnn_frontend.h')) for k in ('purelib', 'platlib')) else 1)" 2>/dev/null ||
    cudnn_pkgs+=(nvidia-cudnn-frontend)
  if [ ! -f "$cuda_include/cudnn_version.h" ] &&
     ! python3 -c "import nvidia.cudnn" 2>/dev/null; then
    cudnn_pkgs+=(nvidia-cudnn-cu13)
  fi
  # FlashInfer: the pinned version's headers only (--no-deps: its Python side, torch
  # included, is not used).
  flashinfer_pin=0.7.2.post1
  if ! python3 -c "import importlib.metadata as m, sys; sys.exit(0 if m.version('flashinfer-python') == '$flashinfer_pin' else 1)" 2>/dev/null; then
    echo "install-deps: installing flashinfer-python==$flashinfer_pin (headers only) from PyPI (FlashInfer's kernels)"
    if ! python3 -m pip --version >/dev/null 2>&1; then
      DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q python3-pip
    fi
    pip=(python3 -m pip install --quiet --disable-pip-version-check --no-deps
         "flashinfer-python==$flashinfer_pin")
    "${pip[@]}" || "${pip[@]}" --break-system-packages
  fi
  if [ "${#cudnn_pkgs[@]}" -gt 0 ]; then
    echo "install-deps: installing ${cudnn_pkgs[*]} from PyPI (cuDNN's SDPA)"
    if ! python3 -m pip --version >/dev/null 2>&1; then
      DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q python3-pip
    fi
    pip=(python3 -m pip install --quiet --disable-pip-version-check "${cudnn_pkgs[@]}")
    "${pip[@]}" || "${pip[@]}" --break-system-packages
  fi
fi
