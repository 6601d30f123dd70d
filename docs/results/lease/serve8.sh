#!/bin/bash
# serve8.sh: issue 6 (carry .whl .whl3; ~9 minutes). Served, whether XLA's graphs of any size
# (--xla_gpu_graph_min_graph_size=1: the in-process act at 5 Hz 0.84x in graphs7.sh) and the periodic keeper
# (--keep-warm-ms 5: one robot 3.44 against 4.00 ms in serve7.sh) shorten one robot's round trip, alone and
# together, then 100 robots under graphs of any size. XLA_FLAGS reaches the server through its environment.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .whl3/*.whl
export PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1
date +%T
graphs=--xla_gpu_graph_min_graph_size=1
one() {  # FLAGS KEEPER-ARGS...: one robot at 5 Hz for 10 s
  local flags=$1; shift
  echo "== 1 robot, XLA_FLAGS='$flags' $* $(date +%T)"
  XLA_FLAGS="$flags" timeout 150 python3 -m benchmarks.serve_latency --preset bridge --robots 1 --seconds 10 "$@" 2>&1 \
    | grep --line-buffered -v -i warning
}
{
  one "$graphs" --keep-warm-ms 0
  one "$graphs" --keep-warm-ms 5
  one "" --keep-warm-ms 0
  one "" --keep-warm-ms 5
  echo "== 100 robots, XLA_FLAGS='$graphs' $(date +%T)"
  XLA_FLAGS="$graphs" timeout 150 python3 -m benchmarks.serve_latency --preset bridge --robots 100 --seconds 20 2>&1 \
    | grep --line-buffered -v -i warning
} | tee $OUT/serve_latency-graphs-keeper.txt
date +%T
