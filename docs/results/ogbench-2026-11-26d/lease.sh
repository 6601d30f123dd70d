#!/bin/bash
# Seventh-session lease (4 GPUs, 64 cores): scene-play and puzzle-4x4-play data under MuJoCo 3.2.7,
# then MQE (alone on a GPU) and GCIQL+GCBC (sharing one) on each, 4 vmapped seeds, evaluations at
# the last three tenths. Env overrides for a tiny local check: W, STEPS, PRESET, DATA_WORKERS,
# EXTRA_DATA_ARGS, EXTRA_REPRO_ARGS, GPUS.
set -u
W=${W:-/tmp/sweep}; mkdir -p $W/logs $W/done $W/data
export JAX_COMPILATION_CACHE_DIR=$W/jax-cache
STEPS=${STEPS:-150000}; EVERY=$((STEPS / 10)); START=$((STEPS * 8 / 10))
PRESET=${PRESET:-ogbench_state}; DATA_WORKERS=${DATA_WORKERS:-32}
read -r -a GPU <<<"${GPUS:-0 1 2 3}"
(nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv; nproc) > $W/logs/machine.txt 2>&1
echo "$(date +%T) data start" >> $W/logs/sweep.log
for name in scene-play-v0 puzzle-4x4-play-v0; do
  python3 -m mqe_model.ogbench.generate $name --out-dir $W/data --workers $DATA_WORKERS --no-progress \
      ${EXTRA_DATA_ARGS:-} > $W/logs/data-$name.log 2>&1 &
done
wait
echo "$(date +%T) data end" >> $W/logs/sweep.log
launch() {  # dataset gpu agent memory-fraction eval-workers
  local D; D=$(ls $W/data/$1*.npz | grep -v -- -val.npz | head -1)
  CUDA_VISIBLE_DEVICES=$2 XLA_PYTHON_CLIENT_MEM_FRACTION=$4 setsid bash -c "python3 -m mqe_model.ogbench.reproduce $1 \
      --agent $3 --preset $PRESET --seeds 0 1 2 3 --vmap-seeds --steps $STEPS --eval-every $EVERY \
      --eval-start $START --eval-workers ${EVAL_WORKERS:-$5} --data $D --runs-dir $W/runs --no-progress ${EXTRA_REPRO_ARGS:-}; \
      echo \$? > $W/done/$1-$3" > $W/logs/$1-$3.log 2>&1 < /dev/null &
  echo "$(date +%T) start $1 $3 on GPU $2: $STEPS updates, evaluations every $EVERY from $START" >> $W/logs/sweep.log
}
launch scene-play-v0 ${GPU[0]} mqe 0.9 12
launch scene-play-v0 ${GPU[1]} gciql 0.45 10
launch scene-play-v0 ${GPU[1]} gcbc 0.45 6
launch puzzle-4x4-play-v0 ${GPU[2]} mqe 0.9 12
launch puzzle-4x4-play-v0 ${GPU[3]} gciql 0.45 10
launch puzzle-4x4-play-v0 ${GPU[3]} gcbc 0.45 6
