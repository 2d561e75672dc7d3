#!/usr/bin/env bash
# Per-row phase statistics of the 007 "stream" candidate on the last of three calls (TAIL_STATS: clock64 at ~1.98 GHz, printf):
# by mode (0 list, 1 hist, 2 plain) and, for list rows, by top_k: rows, draws, re-reads, compactions, appends, and
# the mean / max of the stream, compaction and whole-row times in microseconds.
# Usage (on the GPU machine): [CAND=bench/candidates/OTHER] bash bench/candidates/007_topk_stream/tail-stats.sh [WORKLOAD ...] [-- DEFINE ...]
set -uo pipefail
cd "$(dirname "$0")/../../.."
task=tasks/007_topk_topp_sampling
cand=${CAND:-bench/candidates/007_topk_stream}
source bench/candidates/ablate-lib.sh
defs=(--define TAIL_STATS)
split_args "$@"
for w in "${workloads[@]}"; do
  timeout 90 python3 bench/profile_cuda_solution.py "$task" "$cand" "$w" --calls 3 "${defs[@]}" 2>&1 |
    awk -v w="$w" '/^tailstats/ { line[$3] = $0 }  # the last of the 3 calls: the first runs cold
      END {
        for (row in line) {
        split(line[row], f, " "); for (i = 1; i <= 29; ++i) $i = f[i]
        if (g0 == "" || $27 < g0) g0 = $27; if ($29 > g1) g1 = $29; st[row] = $27; en[row] = $29
        key = "mode " $5 ($5 == 0 ? " k " $15 : "")
        n[key]++; r[key] += $9; p[key] += $11; c[key] += $17; a[key] += $19
        s[key] += $21; cu[key] += $23; ru[key] += $25
        if ($21 > sm[key]) sm[key] = $21; if ($23 > cm[key]) cm[key] = $23; if ($25 > rm[key]) rm[key] = $25
        }
        late = 0; for (row in st) if (st[row] - g0 > late) late = st[row] - g0
        printf "%-20s kernel span %.1f us (first row start to last row end), latest row start +%.1f us\n", w, (g1 - g0) / 1000, late / 1000
        for (k in n) printf "%-20s %-12s rows %3d draws %.2f passes %3d comp %.2f appends %6.0f stream %5.1f/%5.1f comp %5.1f/%5.1f row %5.1f/%5.1f us\n",
          w, k, n[k], r[k]/n[k], p[k], c[k]/n[k], a[k]/n[k], s[k]/n[k], sm[k], cu[k]/n[k], cm[k], ru[k]/n[k], rm[k]
      }' | sort -k2,2 -k3,3 -k4,4n
done
