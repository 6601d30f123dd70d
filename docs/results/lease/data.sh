#!/bin/bash
# data.sh DATASET: call 1 (carry .gl .whl2). Set-up, the machine's description, then DATASET generated
# (OGBench's settings, seed 0) in its own process session on all cores but two; returns at once.
DATASET=${1:?usage: data.sh DATASET}
bash docs/results/lease/setup.sh
export PYTHONPATH=/tmp/site
W=/tmp/sweep; mkdir -p $W/logs $W/data
(date +%T; nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv; nproc; free -g
 python3 -c "import mujoco; print('mujoco', mujoco.__version__)") > $W/logs/machine.txt 2>&1
cat $W/logs/machine.txt
cd /tmp/repo && setsid nohup python3 -m mqe_model.ogbench.generate $DATASET --out-dir $W/data \
  --workers $(( $(nproc) - 2 )) --no-progress > $W/logs/data-$DATASET.log 2>&1 < /dev/null &
sleep 15; tail -2 $W/logs/data-$DATASET.log | cut -c1-300
