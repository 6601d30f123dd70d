#!/bin/bash
# Call 1 (carry .gl .whl2): set-up, then starts scene-play-v0 data (MuJoCo 3.2.7, seed 0, official size)
# in its own process session on 14 of the 16 cores (two stay free for call 2's GPU benchmark), and returns.
bash docs/results/ogbench-2026-11-27f/setup.sh
export PYTHONPATH=/tmp/site
W=/tmp/sweep; mkdir -p $W/logs $W/data
(date +%T; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,memory.total --format=csv; nproc; free -g
 python3 -c "import mujoco; print('mujoco', mujoco.__version__)") > $W/logs/machine.txt 2>&1
cat $W/logs/machine.txt
cd /tmp/repo && setsid nohup python3 -m mqe_model.ogbench.generate scene-play-v0 --out-dir $W/data --workers 14 \
  --no-progress > $W/logs/data-scene-play-v0.log 2>&1 < /dev/null &
sleep 20; tail -3 $W/logs/data-scene-play-v0.log | cut -c1-300
