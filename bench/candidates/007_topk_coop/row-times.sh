#!/usr/bin/env bash
# Per-row phase times of the 007 "coop" candidate on the last of three calls (TAIL_STATS: globaltimer stamps kept in
# device memory and printed once every row is done, so the printing does not slow the rows it measures). By mode
# (0 list, 2 plain) and top_k: rows, draws, passes, appends, and mean / max of the stream, draw, pass and end times
# in microseconds (end: since the first row started).
# Usage (on the GPU machine): bash bench/candidates/007_topk_coop/row-times.sh [WORKLOAD ...] [-- DEFINE ...]
set -uo pipefail
cd "$(dirname "$0")/../../.."
task=tasks/007_topk_topp_sampling
cand=bench/candidates/007_topk_coop
source bench/candidates/ablate-lib.sh
defs=(--define TAIL_STATS)
split_args "$@"
for w in "${workloads[@]}"; do
  timeout 90 python3 bench/profile_cuda_solution.py "$task" "$cand" "$w" --calls 3 "${defs[@]}" 2>&1 |
    awk -v w="$w" '/^rowstat/ { line[$3] = $0 }  # the last of the 3 calls
      END {
        for (row in line) {
          n0 = split(line[row], f, " "); for (i = 1; i <= n0; ++i) $i = f[i]
          key = "mode " $5 ($9 >= 100000 ? " k V" : " k " $9)  # top_k >= V shows as "V" (every timed V is 32000 or more)
          n[key]++; r[key] += $11; p[key] += $13; a[key] += $17
          s[key] += $21; d[key] += $25; q[key] += $27; e[key] += $29
          if ($21 > sm[key]) sm[key] = $21; if ($25 > dm[key]) dm[key] = $25; if ($27 > qm[key]) qm[key] = $27
          if ($29 > em[key]) em[key] = $29; if ($29 > span) span = $29; if ($19 > late) late = $19
        }
        printf "%-20s span %.1f us, latest row start %.1f us\n", w, span, late
        for (k in n) printf "%-20s %-12s rows %3d draws %5.2f passes %3d appends %6.0f stream %5.1f/%5.1f draw %5.1f/%5.1f pass %5.1f/%5.1f end %5.1f/%5.1f us\n",
          w, k, n[k], r[k] / n[k], p[k], a[k] / n[k], s[k] / n[k], sm[k], d[k] / n[k], dm[k], q[k] / n[k], qm[k], e[k] / n[k], em[k]
      }' | sort
done
