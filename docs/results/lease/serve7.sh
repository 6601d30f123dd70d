#!/bin/bash
# serve7.sh: issue 6 (carry .whl .whl3; ~6 minutes; ROUNDS=2 repeats them, ~11). The new GPU defaults (`--conv auto --stack-encoders auto`:
# matmul convolutions, twin encoders) against the old ones (XLA's convolutions, stacked) for 100 robots at
# 5 Hz (the p99 <= 25 ms target, met before with the old ones), then one robot with the new: no keeper, the
# last act rerun every 5 ms (`--keep-warm-ms 5`), and once just before each due request (`--keep-warm-ahead-ms
# 0.5` and `2`). (A matmul server
# compiling into an empty cache needs well over a minute: the first run's limit is long.)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .whl3/*.whl
export PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1
date +%T
for round in $(seq ${ROUNDS:-1}); do
  for setting in "auto auto" "xla on"; do
    set -- $setting
    echo "== round $round, 100 robots, --conv $1 --stack-encoders $2 $(date +%T)"
    timeout 200 python3 -m benchmarks.serve_latency --preset bridge --robots 100 --seconds 20 --conv $1 --stack-encoders $2 \
      2>&1 | grep --line-buffered -v -i warning
  done
  for keeper in "--keep-warm-ms 0" "--keep-warm-ms 5" "--keep-warm-ahead-ms 0.5" "--keep-warm-ahead-ms 2"; do
    echo "== round $round, 1 robot, --conv auto --stack-encoders auto $keeper $(date +%T)"
    timeout 120 python3 -m benchmarks.serve_latency --preset bridge --robots 1 --seconds 10 $keeper 2>&1 \
      | grep --line-buffered -v -i warning
  done
done | tee $OUT/serve_latency-defaults.txt
date +%T
