#!/bin/bash
# ablate.sh DATASET ABLATE-ARGS...: call 2 (carry .gl .whl). Waits for data.sh's data, starts
# `mqe-ogbench-ablate DATASET ABLATE-ARGS... --data ... --runs-dir ...` in its own process session (it
# survives the call), then polls (poll.sh) until the call's 570 s are nearly spent or no run is left.
# With BENCH="ARGS" in the environment, `python -m benchmarks.train_step ARGS` first runs alone on GPU
# BENCH_GPU (default 1) while the data is generated (at most 300 s; output in logs/bench.txt), and
# the ablation starts once both are done: one process per GPU.
DATASET=${1:?usage: ablate.sh DATASET ABLATE-ARGS...}; shift
bash docs/results/lease/setup.sh
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 JAX_COMPILATION_CACHE_DIR=/tmp/sweep/jax-cache
W=/tmp/sweep; cd /tmp/repo; python3 -c "import jax; print(jax.__version__, jax.devices())"
if [ -n "$BENCH" ]; then
  CUDA_VISIBLE_DEVICES=${BENCH_GPU:-1} setsid nohup timeout 300 python3 -m benchmarks.train_step $BENCH \
    > $W/logs/bench.txt 2>&1 < /dev/null &
  sleep 2
fi
while [ ! -f $W/data/$DATASET.json ] || pgrep -f "[b]enchmarks.train_step" > /dev/null; do sleep 5; done
date +%T; tail -1 $W/logs/data-$DATASET.log | cut -c1-300
[ -f $W/logs/bench.txt ] && grep -v Warning $W/logs/bench.txt | tail -8
setsid nohup python3 -m mqe_model.ogbench.ablate $DATASET "$@" --data $W/data/$DATASET.npz --runs-dir $W/runs \
  --no-progress > $W/logs/ablate.log 2>&1 < /dev/null &
bash /tmp/repo/docs/results/lease/poll.sh $(( 570 - SECONDS ))
