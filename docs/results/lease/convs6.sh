#!/bin/bash
# convs6.sh: issue 6 (carry .whl .whl3; ~7 minutes). The bridge act with its convolutions as XLA's op (cuDNN,
# outside the CUDA graphs) and as strided slices and one matmul each (`--conv matmul`: no convolution op, so
# XLA's command buffers can hold the act whole): back to back and at 5 Hz, its three steps, kernels, launches
# and device spans, stacked and twin encoders; then the batch-32 act of each (100 robots' batches).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .whl3/*.whl
export PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1 JAX_COMPILATION_CACHE_DIR=/tmp/jax-cache
date +%T
timeout 330 python3 -m benchmarks.act_latency --preset bridge --runs 200 --paced-runs 25 --profile-calls 20 --top 8 \
  --encoders stacked twin --convs xla matmul --phases 2>&1 | grep --line-buffered -v -i warning \
  | tee $OUT/act_latency-convs.txt
date +%T
timeout 200 python3 -m benchmarks.act_latency --preset bridge --batch 32 --runs 50 --paced-runs 5 --profile-calls 0 \
  --encoders stacked twin --convs xla matmul 2>&1 | grep --line-buffered -v -i warning | tee $OUT/act_latency-convs-batch32.txt
date +%T
