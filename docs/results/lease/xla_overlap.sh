#!/bin/bash
# xla_overlap.sh [SECONDS]: after the runs (never beside them: one process per GPU), issue #3's
# question on a 2-GPU machine: the bridge update's 2-GPU scaling under XLA's defaults, the latency
# hiding scheduler and one combined all-reduce (benchmarks.xla_flags, each setting in a fresh process).
# Output to $OUT/xla_overlap.txt as each setting finishes; stops after SECONDS (default 560; 180 s per setting).
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
cd /tmp/repo && pgrep -f "mqe_model.(ogbench|train)" > /dev/null && { echo "runs still going: not started"; exit 1; }
nvidia-smi --query-gpu=name --format=csv,noheader
timeout ${1:-560} python3 -m benchmarks.xla_flags --target train_throughput --timeout-s 180 \
  --target-args="--preset bridge --devices 1 2 --bare-only" 2>&1 | grep -v Warning | tee $OUT/xla_overlap.txt
