#!/bin/bash
# serve10.sh: issue 6 (carry .whl .whl3; ~10 minutes). The served act with its frames and answers through
# pinned host memory (`mqe-serve --io host`, built in the thirty-first session: in-process 0.94x at 5 Hz)
# against device memory, each pair one after the other in this call: one robot at 5 Hz without a keeper and
# with `--keep-warm-ms 5`, then 100 robots (batches of ~2, up to 100 frames through pinned memory).
# KEEPERS overrides the one-robot keeper list, CROWD_IO the 100-robot list (CROWD_IO= skips them).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .whl3/*.whl
export PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1
date +%T
for keeper in ${KEEPERS-0 5}; do
  for io in device host; do
    echo "== 1 robot, --io $io --keep-warm-ms $keeper $(date +%T)"
    timeout 150 python3 -m benchmarks.serve_latency --preset bridge --robots 1 --seconds 10 --io $io \
      --keep-warm-ms $keeper 2>&1 | grep --line-buffered -v -i warning
  done
done | tee $OUT/serve_latency-io-1-robot.txt
for io in ${CROWD_IO-device host}; do
  echo "== 100 robots, --io $io $(date +%T)"
  timeout 200 python3 -m benchmarks.serve_latency --preset bridge --robots 100 --seconds 20 --io $io 2>&1 \
    | grep --line-buffered -v -i warning
done | tee $OUT/serve_latency-io-100-robots.txt
date +%T
