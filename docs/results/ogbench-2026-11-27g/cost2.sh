#!/bin/bash
# Third lease (carry .whl and the CLI wheels): the cost of actor_goal_pairs=distances (new after the
# second lease), with sampled K = 16 again as the link to the second lease's table.
bash docs/results/ogbench-2026-11-27f/setup.sh > /dev/null 2>&1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
cd /tmp/repo && nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout ${LIMIT:-170} python3 -m benchmarks.train_step --precisions tensorfloat32 --seeds 2 --iters 5 --pallas False \
  --variants actor_goal_pairs=distances "actor_goal_pairs=sampled actor_goal_samples=16" \
  --json $OUT/train_step-distances.json 2>&1 | grep -v Warning | tee $OUT/train_step-distances.txt
