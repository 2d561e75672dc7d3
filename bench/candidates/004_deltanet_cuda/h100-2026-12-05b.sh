#!/usr/bin/env bash
# The fifteenth session's device calls (2026-12-05, an H100 was lent): the GPU check, the walk's diagnosis and the
# warm medians of every workload and V split, then `d2k eval`. Outputs: h100-2026-12-05b-*.txt (the diagnosis of the
# code before any change, after the unrolled cp.async, and with TMA; the d2k eval summary). The sixth call, which the
# tool ran on the H200 (h200-2026-12-05-d2k-eval.txt), was this script less the V splits, WGMMA and diagnose.sh.
# Run from the repository root on the GPU machine (carry .deps): bash bench/candidates/004_deltanet_cuda/h100-2026-12-05b.sh
cd "$(dirname "$0")/../../.." || exit 1
c=bench/candidates/004_deltanet_cuda  # tools
s=tasks/004_chunked_gated_deltanet/expert  # the solution (the task's expert since 2026-12-07)
bash $c/gpu-check.sh >/tmp/gpu-check.txt 2>&1
echo "gpu-check: $(grep -cE ': ok' /tmp/gpu-check.txt) ok lines"; grep -E "MISMATCH|FAIL" /tmp/gpu-check.txt | head
source bench/candidates/ablate-lib.sh
task=tasks/004_chunked_gated_deltanet
for w in qwen3_next_h32_16seq_64k qwen3_next_h32_4seq_16k qwen3_next_h32_1seq_32k qwen3_next_tp2_h16_64seq_8k; do
  run cuda $s $w
done
for sp in 1 2 4; do run "cuda SPLIT=$sp" $s qwen3_next_h32_1seq_32k D2K_SPLIT=$sp; done
run "cuda WGMMA" $s qwen3_next_h32_16seq_64k D2K_WGMMA
run "cuda ONLY_PREP" $s qwen3_next_h32_16seq_64k D2K_ONLY_PREP
bash $c/diagnose.sh 2>&1 | grep -vE "^\s+[0-9.]+%\s" | tail -42
GPU_DEADLINE=420 SUITE_TASKS="004" SUITE_ARGS="--seeds 1 --max-time 1 --no-baselines" \
  SUITE_TASK_TIMEOUT=240 bash scripts/gpu-check.sh experts 2>&1 | grep -vE '^\[' | tail -20
