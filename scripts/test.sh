#!/usr/bin/env bash
# The README's test command: installs, builds and runs every test (CPU; GPU tests skip with a reason),
# then the unit tests again under AddressSanitizer and UndefinedBehaviorSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh -DCMAKE_BUILD_TYPE=RelWithDebInfo
(cd build && ctest --output-on-failure -j "$(nproc)")
D2K_BUILD_DIR=build-asan scripts/build.sh -DCMAKE_BUILD_TYPE=Debug -DD2K_SANITIZE=ON
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j "$(nproc)")
