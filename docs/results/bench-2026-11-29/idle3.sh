#!/bin/bash
# Device call (carry .whl .whl3): issue 6, the round trip half of idle2.sh (whose serve runs failed:
# fastapi 0.165 needs opentelemetry-api, now in .whl3). One robot through mqe-serve at 5 Hz, the host's
# cores idle between requests, then with nice-19 spinners on all cores but two. Output: $OUT/idle3.txt.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .whl/*.whl .whl3/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1
SPIN=$(( $(nproc) - 2 ))
{ date +%T; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
  echo "== serve_latency, 1 robot, cores idle between requests"
  timeout 100 python3 -m benchmarks.serve_latency --preset bridge --robots 1 --seconds 10 2>&1 | grep -v -i warn
  echo "== serve_latency, 1 robot, $SPIN nice-19 spinners"; date +%T
  for i in $(seq $SPIN); do nice -n 19 python3 -c "while True: pass" & done
  timeout 80 python3 -m benchmarks.serve_latency --preset bridge --robots 1 --seconds 10 2>&1 | grep -v -i warn
  pkill -f "[w]hile True: pass"; date +%T; } 2>&1 | tee $OUT/idle3.txt
