#!/bin/bash
# xla_overlap.sh [SECONDS]: issue #3's question on two GPUs: the bridge update's 2-GPU scaling under
# XLA's defaults, the latency hiding scheduler and one combined all-reduce (benchmarks.xla_flags, each
# setting in a fresh process, up to 420 s each: 180 s was not enough for one on 2 x H100, fifteenth
# session). The first call starts it in its own process session; every call waits up to SECONDS
# (default 560) for it to end and copies its output so far to $OUT/xla_overlap.txt, so repeat the call
# until it says "finished".
# GPUS=2,3 in the environment (a 4-GPU machine) runs it on those GPUs beside an ablation on GPUs 0 and 1;
# without GPUS it takes every GPU and refuses to start while runs are going (one process per GPU).
# BENCH="COMMANDS" runs those first, alone on the first GPU of GPUS or on GPU 0 (at most 300 s,
# logs/bench.txt).
# On a machine of its own, the first call sets it up (carry .whl and tyro's wheels, README).
[ -d /tmp/repo ] || bash docs/results/lease/setup.sh
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
LOG=/tmp/sweep/logs/xla_overlap.txt; mkdir -p /tmp/sweep/logs
running() { pgrep -f "[x]la_overlap.chain" > /dev/null; }
cd /tmp/repo
if ! running && [ ! -f $LOG ]; then
  if [ -z "$GPUS" ]; then
    pgrep -f "[m]qe_model.(ogbench|train)" > /dev/null && { echo "runs still going: not started"; exit 1; }
  else
    export CUDA_VISIBLE_DEVICES=$GPUS
  fi
  nvidia-smi --query-gpu=index,name --format=csv,noheader ${GPUS:+-i $GPUS} > $LOG
  export BENCH_GPU=${GPUS:-0}; export BENCH_GPU=${BENCH_GPU%%,*}
  setsid nohup bash -c '# xla_overlap.chain
    [ -n "$BENCH" ] && CUDA_VISIBLE_DEVICES=$BENCH_GPU timeout 300 bash -c "$BENCH" > /tmp/sweep/logs/bench.txt 2>&1
    python3 -m benchmarks.xla_flags --target train_throughput --timeout-s 420 \
      --target-args="--preset bridge --devices 1 2 --bare-only"' >> $LOG 2>&1 < /dev/null &
  sleep 2
fi
end=$(( $(date +%s) + ${1:-560} ))
while [ $(date +%s) -lt $end ] && running; do sleep 5; done
running && echo "still running" || echo "finished"
[ -f /tmp/sweep/logs/bench.txt ] && grep -v Warning /tmp/sweep/logs/bench.txt | tail -60
grep -v Warning $LOG | tee $OUT/xla_overlap.txt
