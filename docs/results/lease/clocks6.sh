#!/bin/bash
# clocks6.sh: the next issue-6 call (carry .whl .whl3; the lease README's "Next, first"). Samples the GPU's
# performance state, clocks, power and utilization every 10 ms while the act runs back to back and at 5 Hz,
# each benchmark line stamped with the time it was printed, so the clock log can be read against each phase;
# act_latency's traces of acts 2 ms apart and at 5 Hz say whether the paced act's kernels run slower or
# spread out; then a 1 GB keeper kernel (~0.45 ms) every 1 and 0.25 ms, which keeps the GPU busy most of the time.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .whl3/*.whl
export PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1
stamp() { while IFS= read -r line; do echo "$(date +%T.%3N) $line"; done; }
nvidia-smi --query-gpu=name,driver_version,persistence_mode,clocks.max.sm,clocks.max.mem --format=csv | tee $OUT/gpu.txt
nvidia-smi -q -d PERFORMANCE >> $OUT/gpu.txt
nvidia-smi --query-gpu=timestamp,pstate,clocks.sm,clocks.mem,power.draw,utilization.gpu \
  --format=csv -lms 10 > $OUT/clocks.csv &
sampler=$!
timeout 150 python3 -m benchmarks.act_latency --preset bridge --runs 300 --paced-runs 25 --profile-calls 20 --top 5 \
  --encoders stacked --phases 2>&1 | grep --line-buffered -v -i warning | stamp | tee $OUT/act_latency-phases.txt
timeout 110 python3 -m benchmarks.idle_latency --preset bridge --calls 30 --kinds wide --periods-ms 1 0.25 \
  --wide-mb 1024 --gaps-ms 2>&1 | grep --line-buffered -v -i warning | stamp | tee $OUT/idle_latency-wide.txt
kill $sampler
nvidia-smi -q -d PERFORMANCE >> $OUT/gpu.txt
python3 docs/results/lease/clock_windows.py $OUT/clocks.csv $OUT/act_latency-phases.txt $OUT/idle_latency-wide.txt \
  | tee $OUT/clock_windows.txt
