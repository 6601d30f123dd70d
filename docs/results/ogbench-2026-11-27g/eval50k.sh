#!/bin/bash
# Call 3: the all-pairs run trains at ~58 updates/s (2 seeds), too slow for 200k in one lease. Waits
# for its 50k checkpoint, stops the ablation (so the default does not start), and evaluates that
# checkpoint in its own process session (OGBench protocol, 16 workers); returns at once.
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
W=/tmp/sweep; CK=$W/runs/allpairs/scene-play-v0/mqe/seeds0-1/checkpoints/50000
while [ ! -f $CK/metadata/metadata ] && [ $SECONDS -lt 560 ]; do sleep 3; done
ls $CK; date +%T
pkill -f mqe_model.ogbench.ablate; pkill -f mqe_model.train; sleep 3; pgrep -fa mqe_model | cut -c1-200
cd /tmp/repo && setsid nohup python3 -m mqe_model.ogbench.evaluate $CK --workers 16 --out $W/eval-allpairs-50k.json \
  > $W/logs/eval-allpairs-50k.log 2>&1 < /dev/null &
sleep 20; tail -3 $W/logs/eval-allpairs-50k.log | cut -c1-300
