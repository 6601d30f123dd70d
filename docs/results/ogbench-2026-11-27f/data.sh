#!/bin/bash
# Call 1 (carry .gl .whl2): set-up, then scene-play-v0 data (MuJoCo 3.2.7, seed 0, official size), one
# generating process per core; waits for the data (its .json marks it complete) up to 540 s.
bash docs/results/ogbench-2026-11-27f/setup.sh
export PYTHONPATH=/tmp/site
W=/tmp/sweep; mkdir -p $W/logs $W/data
(date +%T; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,memory.total --format=csv; nproc; free -g
 python3 -c "import mujoco; print('mujoco', mujoco.__version__)") > $W/logs/machine.txt 2>&1
cat $W/logs/machine.txt
cd /tmp/repo && setsid nohup python3 -m mqe_model.ogbench.generate scene-play-v0 --out-dir $W/data --workers $(nproc) \
  --no-progress > $W/logs/data-scene-play-v0.log 2>&1 < /dev/null &
end=$(( $(date +%s) + 540 ))
while [ $(date +%s) -lt $end ] && [ ! -f $W/data/scene-play-v0.json ]; do sleep 5; done
date +%T; tail -3 $W/logs/data-scene-play-v0.log | cut -c1-300; ls -la $W/data
