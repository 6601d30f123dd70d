#!/bin/bash
# ablate.sh DATASET ABLATE-ARGS...: call 2 (carry .gl .whl). Waits for data.sh's data, starts
# `mqe-ogbench-ablate DATASET ABLATE-ARGS... --data ... --runs-dir ...` in its own process session (it
# survives the call), then polls (poll.sh) until the call's POLL seconds (default 570) are nearly spent or
# no run is left.
# With BENCH="COMMANDS" in the environment (e.g. "python3 -m benchmarks.train_step ...; python3 -m
# benchmarks.profile_train_step ..."), those run first, alone on GPU BENCH_GPU (default 1), while the
# data is generated (at most 360 s; output in logs/bench.txt), and the ablation starts once both are
# done: one process per GPU. TOOL=reproduce runs `mqe-ogbench-repro DATASET ARGS...` (a table row) instead.
# RUNS=NAME puts the runs under /tmp/sweep/NAME (default runs): a second run of the same dataset and agent
# in one lease needs its own, or it finds the first one's checkpoints (poll.sh reads every runs*).
DATASET=${1:?usage: ablate.sh DATASET ABLATE-ARGS...}; shift
bash docs/results/lease/setup.sh
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 JAX_COMPILATION_CACHE_DIR=/tmp/sweep/jax-cache
W=/tmp/sweep; cd /tmp/repo; python3 -c "import jax; print(jax.__version__, jax.devices())"
BENCH_PID=
if [ -n "$BENCH" ]; then
  CUDA_VISIBLE_DEVICES=${BENCH_GPU:-1} setsid nohup timeout 360 bash -c "$BENCH" > $W/logs/bench.txt 2>&1 < /dev/null &
  BENCH_PID=$!
fi
while [ ! -f $W/data/$DATASET.json ] || { [ -n "$BENCH_PID" ] && kill -0 $BENCH_PID 2> /dev/null; }; do sleep 5; done
date +%T; tail -1 $W/logs/data-$DATASET.log | cut -c1-300
[ -f $W/logs/bench.txt ] && grep -v Warning $W/logs/bench.txt | tail -40
TOOL=${TOOL:-ablate}; [ "$TOOL" = ablate ] || [ "$TOOL" = reproduce ] || { echo "TOOL must be ablate or reproduce"; exit 2; }
setsid nohup python3 -m mqe_model.ogbench.$TOOL $DATASET "$@" --data $W/data/$DATASET.npz --runs-dir $W/${RUNS:-runs} \
  --no-progress > $W/logs/ablate.log 2>&1 < /dev/null &
bash /tmp/repo/docs/results/lease/poll.sh $(( ${POLL:-570} - SECONDS ))
