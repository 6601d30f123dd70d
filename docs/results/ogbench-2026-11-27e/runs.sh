#!/bin/bash
# Call 2: queue the first jobs (two per GPU) and start one loop per GPU (gpuloop.sh).
W=/tmp/sweep; mkdir -p $W/queue/0 $W/queue/1
echo "inv32|0 1|invariance_actions=32" > $W/queue/0/a.job
echo "gamma099|0 1|gamma=0.99" > $W/queue/1/a.job
echo "inv128|0 1|invariance_actions=128" > $W/queue/0/b.job
echo "inv32-gamma099|0 1|invariance_actions=32 gamma=0.99" > $W/queue/1/b.job
for g in 0 1; do setsid nohup bash docs/results/ogbench-2026-11-27e/gpuloop.sh $g > $W/logs/gpuloop-$g.log 2>&1 < /dev/null & done
echo "$(date +%T) loops started" >> $W/logs/sweep.log
