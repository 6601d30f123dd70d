#!/bin/bash
# Call 2 (carry .gl .whl): the JAX-side wheels; the all-pairs actor's cost (train_step, while the data is
# generated on the other 14 cores); then, once the data is complete, the ablation in its own process
# session (all-pairs first, then the default as the control; 2 vmapped seeds each, one after the other
# on GPU 0, evaluated at 100k and 200k in background workers); then polls for the rest of the call.
bash docs/results/ogbench-2026-11-27f/setup.sh
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
W=/tmp/sweep; cd /tmp/repo; python3 -c "import jax; print(jax.__version__, jax.devices())"
timeout 200 python3 -m benchmarks.train_step --precisions tensorfloat32 --seeds 2 --iters 5 --pallas False \
  --variants actor_goal_pairs=all 2>&1 | grep -v Warning | tee $W/logs/train_step-allpairs.txt
while [ ! -f $W/data/scene-play-v0.json ]; do sleep 5; done
date +%T; tail -2 $W/logs/data-scene-play-v0.log | cut -c1-300
export JAX_COMPILATION_CACHE_DIR=$W/jax-cache
setsid nohup python3 -m mqe_model.ogbench.ablate scene-play-v0 --variants allpairs=actor_goal_pairs=all default= \
  --seeds 0 1 --vmap-seeds --gpus 0 --steps ${STEPS:-200000} --eval-start 100000 --eval-every 100000 \
  --eval-workers 15 --set matmul_precision=tensorfloat32 --data $W/data/scene-play-v0.npz --runs-dir $W/runs \
  --no-progress > $W/logs/ablate.log 2>&1 < /dev/null &
bash /tmp/repo/docs/results/ogbench-2026-11-27f/poll.sh $(( 560 - SECONDS ))
