#!/bin/bash
# Second lease, call 2 (carry .gl .whl): the JAX-side wheels; train_step with the flat optimizer on the
# idle GPU; then GCIQL with OGBench's settings on the same scene-play data, 2 vmapped seeds, towards 1M
# updates, evaluated every 100k from 300k (a learning curve as far as the lease allows); then polls.
bash docs/results/ogbench-2026-11-27f/setup.sh
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
W=/tmp/sweep; cd /tmp/repo
timeout 170 python3 -m benchmarks.train_step --precisions tensorfloat32 --seeds 8 --iters 10 --pallas False \
  --variants flat_optimizer=true 2>&1 | grep -v Warning | tee $W/logs/train_step-flat.txt
export JAX_COMPILATION_CACHE_DIR=$W/jax-cache
setsid nohup python3 -m mqe_model.ogbench.reproduce scene-play-v0 --agent gciql --seeds 0 1 --vmap-seeds --gpus 0 \
  --steps 1000000 --eval-every 100000 --eval-start 300000 --eval-workers 15 --data $W/data/scene-play-v0.npz \
  --runs-dir $W/runs --no-progress > $W/logs/gciql.log 2>&1 < /dev/null &
bash /tmp/repo/docs/results/ogbench-2026-11-27f/poll.sh $(( 570 - SECONDS ))
