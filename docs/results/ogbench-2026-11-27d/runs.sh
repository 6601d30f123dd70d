#!/bin/bash
# Call 2: MQE on scene-play-v0, SEEDS (default 0 1), one seed alone on each GPU (GPUS, default 0 1), 1M updates,
# evaluated (5 tasks x 50 episodes) at 800k, 900k and 1M only: the three OGBench scores. Matmuls in TF32
# (docs/benchmarks.md: the update's losses equal float32's to 5e-6).
W=/tmp/sweep; cd /tmp/repo
export JAX_COMPILATION_CACHE_DIR=$W/jax-cache
setsid bash -c "while [ ! -f $W/data/scene-play-v0.json ]; do sleep 2; done; echo \$(date +%T) data ready >> $W/logs/sweep.log
  python3 -m mqe_model.ogbench.reproduce scene-play-v0 --agent mqe --seeds ${SEEDS:-0 1} --gpus ${GPUS:-0 1} \
    --steps 1000000 --eval-start 800000 --eval-every 100000 --eval-workers ${EVAL_WORKERS:-12} \
    --data $W/data/scene-play-v0.npz --runs-dir $W/runs --no-progress --set matmul_precision=tensorfloat32
  echo \$? > $W/done/mqe; echo \$(date +%T) done >> $W/logs/sweep.log" > $W/logs/repro-mqe.log 2>&1 < /dev/null &
echo "$(date +%T) started" >> $W/logs/sweep.log
