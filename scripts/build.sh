#!/usr/bin/env bash
# Configures and builds d2k into build/ (or $D2K_BUILD_DIR), with extra CMake arguments passed through.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${D2K_BUILD_DIR:-build}"
PY="${D2K_PYTHON:-$PWD/.venv/bin/python}"
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
cmake -S . -B "$BUILD_DIR" "${GEN[@]}" -DPython3_EXECUTABLE="$PY" "$@" >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)"
