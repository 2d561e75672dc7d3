set -x
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"
nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Xcompiler -fPIC -shared -I../../include -o /tmp/expert.so ../001_varlen_segmented_scan/expert/solution.cu || exit 1
export EXPERT_SO=/tmp/expert.so PYTHONUNBUFFERED=1
timeout 120 python3 gputest.py graph
timeout 300 python3 gputest.py check expert 5
timeout 300 python3 gputest.py check naive,ignores_restarts,off_by_one_boundary,exclusive_scan,calls_torch_cumsum,partial_write
timeout 300 python3 gputest.py time expert,naive,reference
