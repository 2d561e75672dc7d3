# Call 4 (2026-12-04), on the code of that call (CHUNKS 8, lists for top_k <= 128, stream atomics; NOTES.md): per-row
# phase times and the list / ring sizes. Usage (on the GPU machine, from the repository root): bash THIS
set -uo pipefail
source bench/candidates/ablate-lib.sh
task=tasks/007_topk_topp_sampling; c=bench/candidates/007_topk_coop; w=llama3_b256_v128256
bash $c/row-times.sh $w
bash $c/row-times.sh $w -- SOLO
bash $c/row-times.sh $w -- STREAM_ONLY
run "coop" $c $w
run "coop CAP=4096 STAGES=4" $c $w CAP=4096 STAGES=4
run "coop CAP=4096 STAGES=3" $c $w CAP=4096 STAGES=3
run "coop CAP=4096 STAGES=4 stream alone" $c $w CAP=4096 STAGES=4 STREAM_ONLY
run "coop CAP=4096 STAGES=4 stream alone no list" $c $w CAP=4096 STAGES=4 STREAM_ONLY NO_LIST
run "coop CAP=4096 STAGES=4 SOLO" $c $w CAP=4096 STAGES=4 SOLO
bash $c/row-times.sh $w -- CAP=4096 STAGES=4
