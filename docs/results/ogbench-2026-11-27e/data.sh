#!/bin/bash
# Call 1: scene-play-v0 data (MuJoCo 3.2.7, seed 0, official size: 1000 x 1001 steps + 10% validation),
# one generating process per core.
W=/tmp/sweep; mkdir -p $W/logs $W/data $W/done
(date +%T; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv; nproc; free -g
 python3 -c "import mujoco, jax; print('mujoco', mujoco.__version__, 'jax', jax.__version__)") > $W/logs/machine.txt 2>&1
cd /tmp/repo && setsid nohup python3 -m mqe_model.ogbench.generate scene-play-v0 --out-dir $W/data --workers $(nproc) \
  --no-progress > $W/logs/data-scene-play-v0.log 2>&1 < /dev/null &
sleep 10; cat $W/logs/machine.txt; tail -3 $W/logs/data-scene-play-v0.log
