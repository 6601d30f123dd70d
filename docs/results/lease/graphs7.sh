#!/bin/bash
# graphs7.sh: issue 6 (carry .whl .whl3; ~6 minutes). Whether XLA's command buffers (CUDA graphs) can take
# more of the twin matmul act, whose device still waits for the host (busy 25 % of its span, 228 launches;
# bench-2026-12-01g): its figures, launches and device spans under XLA's default graphs, graphs of any size,
# and graphs that also take loops and conditionals, each setting in a fresh process (benchmarks.xla_flags).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .whl3/*.whl
export PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1
date +%T
timeout 420 python3 -m benchmarks.xla_flags --target act_latency --timeout-s 130 \
  --target-args="--preset bridge --runs 100 --paced-runs 15 --profile-calls 10 --encoders twin --convs matmul" \
  --variant base= --variant "graphs of any size=--xla_gpu_graph_min_graph_size=1" \
  --variant "loops in graphs=--xla_gpu_enable_command_buffer=FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN,WHILE,CONDITIONAL --xla_gpu_graph_min_graph_size=1" \
  2>&1 | grep --line-buffered -v -i warning | tee $OUT/xla_flags-act-matmul.txt
date +%T
