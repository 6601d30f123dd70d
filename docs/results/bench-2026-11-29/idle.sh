#!/bin/bash
# Device call (carry .whl .whl3): issue 6's idle-latency question on one GPU, before anything else runs
# on the machine. Output: $OUT/idle_latency-bridge.txt (also printed).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .whl/*.whl .whl3/*.whl 2>&1 | tail -2 && touch /tmp/.whl.done
export PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1
{ date +%T; nproc; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version --format=csv
  timeout 400 python3 -m benchmarks.idle_latency --preset bridge --calls 40 2>&1 | grep -v -i warn
  echo "exit $?"; nvidia-smi --query-gpu=clocks.sm --format=csv; date +%T; } 2>&1 | tee $OUT/idle_latency-bridge.txt
