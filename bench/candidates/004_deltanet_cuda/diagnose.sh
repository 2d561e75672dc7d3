#!/usr/bin/env bash
# Where a chunk step of the walk spends its ~8 us (written 2026-12-05, fifteenth session): the walk's phase clocks
# (D2K_PHASES: mean cycles per warp and chunk between the loop's phase boundaries, and CTA nanoseconds per chunk),
# the walk's SASS instruction mix, and Nsight Compute's warp-state and per-instruction stall samples on 1seq_32k at
# V split 1 (32 CTAs, one chain per SM, no HBM contention: the pure latency of a step).
# Run from the repository root on the GPU machine (carry .deps):
#   bash bench/candidates/004_deltanet_cuda/diagnose.sh 2>&1 | tee $OUT/diagnose.txt | tail -60
# The per-instruction table goes to $OUT/walk-sass-top.txt (and the whole source page, gzipped, beside it).
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
source bench/candidates/ablate-lib.sh
task=tasks/004_chunked_gated_deltanet
s=tasks/004_chunked_gated_deltanet/expert  # the solution (the task's expert since 2026-12-07)
out=${OUT:-/tmp}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu --format=csv,noheader
phases() {  # label workload [define ...]
  local label=$1 w=$2 args=() d
  shift 2
  for d in "$@"; do args+=(--define "$d"); done
  echo "-- $label on $w"
  timeout 90 python3 bench/profile_cuda_solution.py "$task" "$s" "$w" --calls 3 --define D2K_PHASES "${args[@]}" 2>&1 |
    grep -E "^phases|median|Error|error" | tail -2
}
echo "== phase clocks (t=${SECONDS}s)"
phases "default" qwen3_next_h32_16seq_64k
phases "split 1" qwen3_next_h32_1seq_32k D2K_SPLIT=1
phases "WGMMA" qwen3_next_h32_16seq_64k D2K_WGMMA
phases "split 2" qwen3_next_h32_1seq_32k D2K_SPLIT=2
phases "default" qwen3_next_tp2_h16_64seq_8k

echo "== SASS mix of walk_kernel<8, false> (t=${SECONDS}s)"
nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Xcompiler -fPIC -shared -lineinfo -Iinclude \
  $s/solution.cu -o /tmp/walk-diag.so 2>&1 | grep -E "error" | head
objdump_bin=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
if [[ -n $objdump_bin ]]; then
  "$objdump_bin" -sass /tmp/walk-diag.so >/tmp/all.sass 2>/dev/null
  awk '/Function : .*walk_kernelILi8ELb0E/{f=1;next} /Function :/{f=0} f' /tmp/all.sass >/tmp/walk8.sass
  gzip -c /tmp/walk8.sass >"$out/walk8.sass.gz"
  grep -oE '^\s+/\*[0-9a-f]{4}\*/\s+[^;]*;' /tmp/walk8.sass | sed -E 's/^\s+\/\*[0-9a-f]+\*\/\s+//; s/^@!?U?P[0-9T]+ //' |
    awk '{print $1}' | sed 's/\..*//' | sort | uniq -c | sort -rn | head -25 | tr '\n' ' '
  echo
else
  echo "cuobjdump not found"
fi

echo "== ncu on the walk, 1seq_32k split 1 (t=${SECONDS}s)"
ncu_bin=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
if [[ -n $ncu_bin ]]; then
  timeout 240 "$ncu_bin" --clock-control none --kernel-name regex:walk --launch-skip 1 --launch-count 1 \
    --section WarpStateStats --section SourceCounters --section SchedulerStats --section ComputeWorkloadAnalysis \
    --import-source yes -f -o /tmp/walk-ncu \
    python3 bench/profile_cuda_solution.py "$task" "$s" qwen3_next_h32_1seq_32k --calls 2 --define D2K_SPLIT=1 \
    >/tmp/ncu-run.txt 2>&1
  grep -E "==ERROR==|==WARNING==" /tmp/ncu-run.txt | head -5
  "$ncu_bin" -i /tmp/walk-ncu.ncu-rep --page details 2>&1 |
    grep -E "Duration|Warp Cycles Per|Issued Warp|No Eligible|Active Warps|Eligible Warps|Stall|Executed Ipc|Pipe" | head -30
  "$ncu_bin" -i /tmp/walk-ncu.ncu-rep --page raw --csv 2>/dev/null |
    python3 -c '
import csv, sys
rows = list(csv.reader(sys.stdin))
if len(rows) >= 3:
    hdr, vals = rows[0], rows[2]
    st = [(float(v.replace(",", "")), h) for h, v in zip(hdr, vals)
          if h.startswith("smsp__average_warp_latency_issue_stalled_") or h.startswith("smsp__average_warps_issue_stalled_")
          if v.replace(",", "").replace(".", "", 1).isdigit()]
    for v, h in sorted(st, reverse=True)[:14]: print(f"  {h:75s} {v:10.3f}")
'
  "$ncu_bin" -i /tmp/walk-ncu.ncu-rep --page source --csv --print-source sass 2>/dev/null >/tmp/walk-source.csv
  gzip -c /tmp/walk-source.csv >"$out/walk-source.csv.gz"
  python3 - /tmp/walk-source.csv "$out/walk-sass-top.txt" <<'EOF'
import csv, sys
with open(sys.argv[1]) as f:
    rows = [r for r in csv.reader(f)]
hdr_i = next((i for i, r in enumerate(rows) if any("Source" == c or "Address" == c for c in r)), None)
if hdr_i is None:
    print("source page: no header found"); sys.exit(0)
hdr = rows[hdr_i]
def col(name):
    return next((i for i, h in enumerate(hdr) if h.startswith(name)), None)
src, samp = col("Source"), col("Warp Stall Sampling (All")
if samp is None:
    print("source page columns:", hdr[:30]); sys.exit(0)
body = [r for r in rows[hdr_i + 1:] if len(r) == len(hdr)]
def num(x):
    try: return float(x.replace(",", ""))
    except ValueError: return 0.0
total = sum(num(r[samp]) for r in body) or 1.0
top = sorted(body, key=lambda r: -num(r[samp]))[:60]
with open(sys.argv[2], "w") as out:
    out.write("\t".join(hdr) + "\n")
    for r in top: out.write("\t".join(r) + "\n")
print(f"  {len(body)} SASS lines, {total:.0f} samples; top 25 (share, instruction):")
for r in top[:25]: print(f"  {100 * num(r[samp]) / total:5.1f}%  {r[src][:90]}")
# samples by opcode
byop = {}
for r in body:
    toks = r[src].split()
    if toks and toks[0].startswith("@"): toks = toks[1:]
    op = toks[0].split(".")[0] if toks else "?"
    byop[op] = byop.get(op, 0) + num(r[samp])
print("  by opcode:", ", ".join(f"{k} {100 * v / total:.1f}%" for k, v in sorted(byop.items(), key=lambda kv: -kv[1])[:14]))
EOF
else
  echo "ncu not found"
fi
echo "== done (t=${SECONDS}s)"
