# Call 6 (2026-12-04), the final code: coop beside the expert and "stream", its variants, per-row phase times, and
# the three other workloads (final-2026-12-04.txt). Usage (on the GPU machine, from the repository root): bash THIS
set -uo pipefail
source bench/candidates/ablate-lib.sh
task=tasks/007_topk_topp_sampling; c=bench/candidates/007_topk_coop; w=llama3_b256_v128256
run "expert" $task/expert $w
run "stream" bench/candidates/007_topk_stream $w
run "coop (ALLLIST CAP=4096 STAGES=3)" $c $w
run "coop NO_ALLLIST" $c $w NO_ALLLIST
run "coop CAP=8192 STAGES=2" $c $w CAP=8192 STAGES=2
run "coop NO_EARLY" $c $w NO_EARLY
run "coop SOLO" $c $w SOLO
run "coop stream alone" $c $w STREAM_ONLY
run "coop stream alone, no list" $c $w STREAM_ONLY NO_LIST
bash $c/row-times.sh $w
for w2 in qwen2_b128_v151936 llama3_b16_v128256 llama2_b64_v32000; do
  run "expert" $task/expert $w2
  run "coop" $c $w2
done
