#!/bin/bash
# ablate.sh DATASET ABLATE-ARGS...: call 2 (carry .gl .whl). Waits for data.sh's data, starts
# `mqe-ogbench-ablate DATASET ABLATE-ARGS... --data ... --runs-dir ...` in its own process session (it
# survives the call), then polls (poll.sh) until the call's 570 s are nearly spent or no run is left.
DATASET=${1:?usage: ablate.sh DATASET ABLATE-ARGS...}; shift
bash docs/results/lease/setup.sh
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 JAX_COMPILATION_CACHE_DIR=/tmp/sweep/jax-cache
W=/tmp/sweep; cd /tmp/repo; python3 -c "import jax; print(jax.__version__, jax.devices())"
while [ ! -f $W/data/$DATASET.json ]; do sleep 5; done
date +%T; tail -1 $W/logs/data-$DATASET.log | cut -c1-300
setsid nohup python3 -m mqe_model.ogbench.ablate $DATASET "$@" --data $W/data/$DATASET.npz --runs-dir $W/runs \
  --no-progress > $W/logs/ablate.log 2>&1 < /dev/null &
bash /tmp/repo/docs/results/lease/poll.sh $(( 570 - SECONDS ))
