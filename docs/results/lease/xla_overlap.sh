#!/bin/bash
# xla_overlap.sh [SECONDS]: after the runs (never beside them: one process per GPU), issue #3's
# question on a 2-GPU machine: the bridge update's 2-GPU scaling under XLA's defaults, the latency
# hiding scheduler and one combined all-reduce (benchmarks.xla_flags, each setting in a fresh process,
# up to 420 s each: 180 s was not enough for one on 2 x H100, fifteenth session). The first call starts
# it in its own process session; every call waits up to SECONDS (default 560) for it to end and copies
# its output so far to $OUT/xla_overlap.txt, so repeat the call until it says "finished".
# On a machine of its own, the first call sets it up (carry .whl and tyro's wheels, README).
[ -d /tmp/repo ] || bash docs/results/lease/setup.sh
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
LOG=/tmp/sweep/logs/xla_overlap.txt; mkdir -p /tmp/sweep/logs
running() { pgrep -f "[b]enchmarks.xla_flags" > /dev/null; }
cd /tmp/repo
if ! running && [ ! -f $LOG ]; then
  pgrep -f "[m]qe_model.(ogbench|train)" > /dev/null && { echo "runs still going: not started"; exit 1; }
  nvidia-smi --query-gpu=name --format=csv,noheader > $LOG
  setsid nohup python3 -m benchmarks.xla_flags --target train_throughput --timeout-s 420 \
    --target-args="--preset bridge --devices 1 2 --bare-only" >> $LOG 2>&1 < /dev/null &
  sleep 2
fi
end=$(( $(date +%s) + ${1:-560} ))
while [ $(date +%s) -lt $end ] && running; do sleep 5; done
running && echo "still running" || echo "finished"
grep -v Warning $LOG | tee $OUT/xla_overlap.txt
