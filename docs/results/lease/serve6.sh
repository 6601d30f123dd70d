#!/bin/bash
# serve6.sh: the issue-6 call (carry .whl .whl3; the lease README's "Next, first"). One robot through a
# real mqe-serve with stacked and twin encoders, interleaved twice; the act's three steps at batch 1 and
# the batch-32 act of both; the keepers in the acting thread. Every benchmark's output goes to $OUT as it runs, so a cut call keeps what ran.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .whl3/*.whl
export PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1
date +%T; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
for e in on twin on twin; do
  timeout 150 python3 -m benchmarks.serve_latency --preset bridge --robots 1 --seconds 10 --stack-encoders $e 2>&1 \
    | grep -v -i warning | tee -a $OUT/serve_latency-on-twin.txt
done
date +%T
timeout 150 python3 -m benchmarks.act_latency --preset bridge --runs 100 --paced-runs 20 --profile-calls 0 \
  --encoders stacked twin --phases 2>&1 | grep -v -i warning | tee $OUT/act_latency-phases.txt
date +%T
timeout 150 python3 -m benchmarks.act_latency --preset bridge --batch 32 --runs 50 --paced-runs 5 --profile-calls 0 \
  --encoders stacked twin 2>&1 | grep -v -i warning | tee $OUT/act_latency-batch32.txt
date +%T
timeout 150 python3 -m benchmarks.idle_latency --preset bridge --calls 40 --kinds wide poll self-tiny spin --periods-ms 1 \
  --gaps-ms 2>&1 | grep -v -i warning | tee $OUT/idle_latency-thread-keepers.txt
date +%T; nvidia-smi --query-gpu=clocks.sm,clocks.mem --format=csv,noheader
