# Call 5 (2026-12-04), on the code of that call (a stream without shared atomics, since reverted; NOTES.md): the
# lists for every tested row (ALLLIST). Usage (on the GPU machine, from the repository root): bash THIS
set -uo pipefail
source bench/candidates/ablate-lib.sh
task=tasks/007_topk_topp_sampling; c=bench/candidates/007_topk_coop; w=llama3_b256_v128256
run "coop (no stream atomics)" $c $w
run "coop ALLLIST" $c $w ALLLIST
run "coop ALLLIST CAP=4096 STAGES=3" $c $w ALLLIST CAP=4096 STAGES=3
run "coop ALLLIST CAP=4096 STAGES=4" $c $w ALLLIST CAP=4096 STAGES=4
run "coop ALLLIST CAP=4096 STAGES=3 SOLO" $c $w ALLLIST CAP=4096 STAGES=3 SOLO
run "stream alone, no list" $c $w STREAM_ONLY NO_LIST
run "stream alone, ALLLIST CAP=4096 STAGES=3" $c $w STREAM_ONLY ALLLIST CAP=4096 STAGES=3
bash $c/row-times.sh $w
bash $c/row-times.sh $w -- ALLLIST CAP=4096 STAGES=3
for w2 in qwen2_b128_v151936 llama3_b16_v128256 llama2_b64_v32000; do
  run "expert" $task/expert $w2
  run "coop ALLLIST CAP=4096 STAGES=3" $c $w2 ALLLIST CAP=4096 STAGES=3
done
