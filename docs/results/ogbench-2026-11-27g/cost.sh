#!/bin/bash
# Second lease (carry .gl .whl): the cost of the actor's goal pairings on an idle GPU, one run of
# benchmarks.train_step (own = 'fused tensorfloat32'; 'sampled' K = 16 and 64; 'all' = K = 256).
bash docs/results/ogbench-2026-11-27f/setup.sh > /dev/null 2>&1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
cd /tmp/repo && nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout ${LIMIT:-330} python3 -m benchmarks.train_step --precisions tensorfloat32 --seeds 2 --iters 5 --pallas False \
  --variants "actor_goal_pairs=sampled actor_goal_samples=16" "actor_goal_pairs=sampled actor_goal_samples=64" \
  actor_goal_pairs=all --json $OUT/train_step-pairs.json 2>&1 | grep -v Warning | tee $OUT/train_step-pairs.txt
