#!/bin/bash
# serve10.sh: issue 6 (carry .whl .whl3; ~10 minutes). The two settings built in the thirty-first session,
# served on a GPU, each row beside its control in this call: `--io host` (frames and answers through pinned
# host memory; in-process 0.94x the act at 5 Hz) and `--inline-lone-requests` (a lone request acts on the
# event loop thread; on a CPU 0.92-0.96x one robot's round trip). One robot at 5 Hz for each ROW (keeper
# period, io, inline or -), then 100 robots for each CROWD row (io, inline or -): neither may raise
# 100 robots' p99 (inline: the loop reads no request while it acts). ROWS= or CROWD= skips a part.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .whl3/*.whl
export PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1
flags() { echo "--io $1 $([ "$2" = inline ] && echo --inline-lone-requests || echo --no-inline-lone-requests)"; }
date +%T
for row in ${ROWS-0:device:- 0:host:- 0:device:inline 5:device:- 5:host:- 5:host:inline}; do
  IFS=: read keeper io inline <<< "$row"
  echo "== 1 robot, --keep-warm-ms $keeper $(flags $io $inline) $(date +%T)"
  timeout 150 python3 -m benchmarks.serve_latency --preset bridge --robots 1 --seconds 10 --keep-warm-ms $keeper \
    $(flags $io $inline) 2>&1 | grep --line-buffered -v -i warning
done | tee $OUT/serve_latency-1-robot.txt
for row in ${CROWD-device:- host:- device:inline}; do
  IFS=: read io inline <<< "$row"
  echo "== 100 robots, $(flags $io $inline) $(date +%T)"
  timeout 200 python3 -m benchmarks.serve_latency --preset bridge --robots 100 --seconds 20 $(flags $io $inline) 2>&1 \
    | grep --line-buffered -v -i warning
done | tee $OUT/serve_latency-100-robots.txt
date +%T
