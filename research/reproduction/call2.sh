#!/bin/bash
# Step 2 (needs the wheels in .whl): set-up (flax, optax, orbax for ours), the pipeline started in the background, then
# polled until POLL seconds (default 540) of the call are nearly spent.
bash research/reproduction/setup.sh
W=/tmp/sweep
setsid nohup bash /tmp/repo/research/reproduction/pipeline.sh ${STEPS:-200000} > $W/logs/pipeline.log 2>&1 < /dev/null &
sleep 2
bash /tmp/repo/research/reproduction/poll.sh $(( ${POLL:-540} - SECONDS ))
