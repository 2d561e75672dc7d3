#!/usr/bin/env bash
# The README's main job: installs, builds, checks the suite and lists it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
build/src/d2k validate
build/src/d2k tasks
