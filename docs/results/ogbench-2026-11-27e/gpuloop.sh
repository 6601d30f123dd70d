#!/bin/bash
# gpuloop.sh GPU: run the jobs queued for one GPU ($W/queue/GPU/*.job, in name order), one at a time, until
# $W/queue/GPU/STOP exists; a job can be added or replaced while an earlier one runs. Each job file holds
# "VARIANT|SEEDS|OVERRIDES": MQE on scene-play-v0, the seeds vmapped in one run on this GPU, 200k updates,
# evaluated once at 200k (5 tasks x 50 episodes per seed), TF32 matmuls plus the variant's overrides.
G=$1; W=/tmp/sweep; Q=$W/queue/$G; mkdir -p $Q; cd /tmp/repo
export JAX_COMPILATION_CACHE_DIR=$W/jax-cache
while [ ! -f $W/data/scene-play-v0.json ]; do sleep 2; done
while [ ! -f $Q/STOP ]; do
  job=$(ls $Q/*.job 2>/dev/null | head -1)
  [ -z "$job" ] && { sleep 2; continue; }
  IFS='|' read -r variant seeds overrides < "$job"; mv "$job" "$job.started"
  echo "$(date +%T) gpu $G start $variant seeds $seeds: $overrides" >> $W/logs/sweep.log
  python3 -m mqe_model.ogbench.reproduce scene-play-v0 --agent mqe --seeds $seeds --vmap-seeds --gpus $G \
    --steps 200000 --eval-start 200000 --eval-every 200000 --eval-workers ${EVAL_WORKERS:-14} \
    --data $W/data/scene-play-v0.npz --runs-dir $W/runs/$variant --no-progress \
    --set matmul_precision=tensorfloat32 $overrides > $W/logs/repro-$variant.log 2>&1 < /dev/null
  echo "$(date +%T) gpu $G done $variant rc $?" >> $W/logs/sweep.log
done
