#!/bin/bash
# Call 2: MQE on scene-play-v0, seeds 0-3, one seed alone on each of the 4 GPUs, STEPS updates (default 1M),
# an evaluation (5 tasks x 50 episodes) every 100k, 12 evaluation workers per run. Matmuls in TF32: the
# update's losses equal float32's to 5e-6 (docs/benchmarks.md), and TPUs, where the paper trained, round
# float32 matmul operands to bfloat16 by default.
W=/tmp/sweep; cd /tmp/repo
export JAX_COMPILATION_CACHE_DIR=$W/jax-cache
setsid bash -c "while [ ! -f $W/data/scene-play-v0.json ]; do sleep 2; done; echo \$(date +%T) data ready >> $W/logs/sweep.log
  python3 -m mqe_model.ogbench.reproduce scene-play-v0 --agent mqe --seeds 0 1 2 3 --gpus 0 1 2 3 \
    --steps ${STEPS:-1000000} --eval-every 100000 --eval-workers 12 --data $W/data/scene-play-v0.npz \
    --runs-dir $W/runs --no-progress --set matmul_precision=tensorfloat32
  echo \$? > $W/done/mqe; echo \$(date +%T) done >> $W/logs/sweep.log" > $W/logs/repro-mqe.log 2>&1 < /dev/null &
echo "$(date +%T) started (STEPS=${STEPS:-1000000})" >> $W/logs/sweep.log
