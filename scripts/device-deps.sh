#!/usr/bin/env bash
# Unpacks Debian's -dev packages that d2k builds against into .deps/ (ignored by git), for a machine
# that has a compiler, CUDA and Python but no package registry (the lent GPU machine). Run it here;
# the device call carries .deps and passes -DCMAKE_PREFIX_PATH=$PWD/.deps/usr.
set -euo pipefail
cd "$(dirname "$0")/.."
PKGS=(nlohmann-json3-dev libtomlplusplus-dev libtomlplusplus3 libcli11-dev libfmt-dev libfmt9
      libmuparser-dev libmuparser2v5 libgtest-dev libgmock-dev libssl-dev libssl3
      bubblewrap libcap2 libselinux1 libpcre2-8-0)  # .deps/usr/bin/bwrap: the agent's sandbox (src/agent/sandbox)
rm -rf .deps && mkdir -p .deps/debs
(cd .deps/debs && apt-get download "${PKGS[@]}" >/dev/null)
for f in .deps/debs/*.deb; do dpkg -x "$f" .deps; done
rm -rf .deps/debs .deps/usr/share/doc
# Absolute symlinks inside the packages point at /usr; make them relative to .deps.
find .deps -type l | while read -r l; do
  t=$(readlink "$l")
  if [[ $t == /* ]]; then ln -sfn "$(realpath -m --relative-to="$(dirname "$l")" ".deps$t")" "$l"; fi
done
du -sh .deps
