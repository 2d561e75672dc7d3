#!/usr/bin/env bash
# Installs what d2k needs on a Debian machine: native -dev packages (apt) and the Python environment
# (.venv: Debian's python3 with its CPU PyTorch, plus Triton from PyPI for the interpreter path).
# Idempotent: does nothing that is already done.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  cmake ninja-build g++ pkg-config
  nlohmann-json3-dev libtomlplusplus-dev libcli11-dev libfmt-dev libmuparser-dev
  libgtest-dev libgmock-dev libssl-dev libsqlite3-dev libcurl4-openssl-dev
  python3 python3-dev python3-venv python3-pip python3-numpy python3-torch
  bubblewrap
  chromium
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: apt packages: ${missing[*]}"
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The Python side. Debian's python3 (the one python3-dev embeds) sees python3-torch through
# --system-site-packages; Triton 3.1 is the newest whose interpreter runs on Debian's torch 1.13.
if [[ ! -x .venv/bin/python ]]; then
  /usr/bin/python3 -m venv --system-site-packages .venv
fi
if ! .venv/bin/python -c "import triton, torch" >/dev/null 2>&1 || ! cmp -s requirements.txt .venv/.d2k-requirements; then
  echo "install-deps: python packages from requirements.txt"
  .venv/bin/python -m pip install -q --disable-pip-version-check -r requirements.txt
  cp requirements.txt .venv/.d2k-requirements
fi
