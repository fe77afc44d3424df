#!/usr/bin/env bash
# Installs what attntune needs on a fresh Debian bookworm machine: the build tool
# chain and libraries (Debian packages), and with --test what the tests use
# (headless Chromium; clang for the libFuzzer targets; numpy and safetensors for the
# independent fp64 checks; python3-dev, pybind11-dev, libdlpack-dev and scikit-build-core
# for the Python binding, which the library's install test builds with pip; torch and
# transformers for scripts/capture_qkv.py's tests, which run small randomly initialised
# models on the CPU: torch from PyPI brings its CUDA libraries too, about 4 GB).
set -euo pipefail

want_tests=0
[ "${1:-}" = "--test" ] && want_tests=1

packages=(g++ cmake make pkg-config libsqlite3-dev sqlite3 nlohmann-json3-dev libcli11-dev
          libtrilinos-kokkos-dev libjs-chart.js libeigen3-dev zlib1g-dev catch2
          libopenblas-dev libssl-dev)
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
