#!/bin/bash
# Call 2 (carry .gl .whl): the JAX-side wheels, two train_step benchmarks on the idle GPU, then the
# ablation (four variants, 2 vmapped seeds each, all four runs sharing GPU 0) in its own process
# session; then polls (poll.sh) for the rest of the call.
bash docs/results/ogbench-2026-11-27f/setup.sh
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
W=/tmp/sweep; cd /tmp/repo; python3 -c "import jax; print(jax.__version__, jax.devices())"
timeout 150 python3 -m benchmarks.train_step --precisions tensorfloat32 --seeds 8 --variants flat_optimizer=true \
  2>&1 | grep -v Warning | tee $W/logs/train_step-flat.txt
while [ ! -f $W/data/scene-play-v0.json ]; do sleep 5; done
export JAX_COMPILATION_CACHE_DIR=$W/jax-cache
setsid nohup python3 -m mqe_model.ogbench.ablate scene-play-v0 --variants default= lam099=lam=0.99 \
  squared=invariance_form=squared \
  "public-code=gamma=0.99 lam=0.99 invariance_form=squared actor_heads=farthest actor_layer_norm=false" \
  --seeds 0 1 --vmap-seeds --gpus 0 --runs-per-gpu 4 --steps 200000 --eval-start 200000 --eval-every 200000 \
  --eval-workers 4 --set matmul_precision=tensorfloat32 --data $W/data/scene-play-v0.npz --runs-dir $W/runs \
  --no-progress > $W/logs/ablate.log 2>&1 < /dev/null &
sleep 5
timeout 120 python3 -m benchmarks.train_step --precisions tensorfloat32 --seeds 2 --iters 5 --pallas False \
  --variants actor_goal_pairs=all 2>&1 | grep -v Warning | tee $W/logs/train_step-allpairs.txt
bash /tmp/repo/docs/results/ogbench-2026-11-27f/poll.sh $(( 560 - SECONDS ))
