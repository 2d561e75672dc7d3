# Call 8 (2026-12-04): the SEG variant (warp-private list segments: no shared counter or max atomics per stage).
set -uo pipefail
source bench/candidates/ablate-lib.sh
task=tasks/007_topk_topp_sampling; c=bench/candidates/007_topk_coop; w=llama3_b256_v128256
run "coop" $c $w
run "coop SEG" $c $w SEG
run "coop SEG CAP=6144" $c $w SEG CAP=6144
run "coop stream alone" $c $w STREAM_ONLY
run "coop stream alone SEG" $c $w STREAM_ONLY SEG
run "coop stream alone SEG no list" $c $w STREAM_ONLY SEG NO_LIST
bash $c/row-times.sh $w -- SEG
run "coop SEG" $c qwen2_b128_v151936 SEG
