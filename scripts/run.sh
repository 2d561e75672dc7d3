#!/usr/bin/env bash
# The README's main job: installs, builds, checks the suite, lists it, and evaluates the expert solutions
# (on the GPU when there is one; otherwise the correctness workloads on the CPU).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
build/src/d2k validate
build/src/d2k tasks
build/src/d2k eval --solutions expert
