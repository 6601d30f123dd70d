#!/bin/bash
# Device call (carry .whl .whl3): issue 6, second question. How long must the host be idle before an
# act slows down, and does keeping the host's cores busy (nice-19 spinners) remove the slowdown, both
# for the bare act and for one robot's round trip through mqe-serve? Output: $OUT/idle2.txt.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .whl/*.whl .whl3/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1
SPIN=$(( $(nproc) - 2 ))
{ date +%T; nproc; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
  timeout 200 python3 -m benchmarks.idle_latency --preset bridge --calls 20 --kinds tiny --periods-ms 10 \
    --spinners $SPIN --gap-calls 20 2>&1 | grep -v -i warn
  echo "== serve_latency, 1 robot, cores idle between requests"; date +%T
  timeout 150 python3 -m benchmarks.serve_latency --preset bridge --robots 1 --seconds 15 2>&1 | grep -v -i warn
  echo "== serve_latency, 1 robot, $SPIN nice-19 spinners"; date +%T
  for i in $(seq $SPIN); do nice -n 19 python3 -c "while True: pass" & done
  timeout 150 python3 -m benchmarks.serve_latency --preset bridge --robots 1 --seconds 15 2>&1 | grep -v -i warn
  pkill -f "[w]hile True: pass"; date +%T; } 2>&1 | tee $OUT/idle2.txt
