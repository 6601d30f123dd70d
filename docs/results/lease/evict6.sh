#!/bin/bash
# evict6.sh: issue 6 (carry .whl .whl3 .ab; ~6 minutes; .ab/old made first, on this machine, by
#   mkdir -p .ab/old && git archive 5d93a46 mqe_model server benchmarks ':!mqe_model/demo' | tar -x -C .ab/old
# ). Are a lone robot's slower acts the host's cold caches?
# The GPU's clocks stay up between paced acts, its kernels take the same time and the device waits for the
# host (bench-2026-12-01e); on this project's CPU, 512 MB written before an act right after the last one cost
# it a third to two thirds of what 200 ms idle does (docs/benchmarks.md, twenty-eighth session). The same on the H200: the
# stacked act after idle gaps, and after the same gaps with 1 GB of host memory written before it; and the act
# itself as a keeper every 5 and 2 ms, near the gap after which acts stay fast.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .whl3/*.whl
export PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1
{ date +%T; lscpu | grep -i -E "model name|cache|^cpu\(s\)"; } | tee $OUT/host.txt
for mb in 1024 64; do
  timeout 200 python3 -m benchmarks.idle_latency --preset bridge --calls 20 --kinds act --periods-ms 5 2 \
    --gaps-ms 0 2 10 200 --gap-calls 30 --evict-mb $mb 2>&1 | grep --line-buffered -v -i warning \
    | tee -a $OUT/idle_latency-evict.txt
done
date +%T
# The goal codes kept on the device and the one packed output against the tree before them (.ab/old, the
# parent commit's mqe_model, server and benchmarks), stacked encoders, interleaved twice.
for round in 1 2; do
  for tree in .ab/old .; do
    echo "== round $round, tree $tree $(date +%T)" | tee -a $OUT/act_latency-resident.txt
    (cd $tree && timeout 100 python3 -m benchmarks.act_latency --preset bridge --runs 200 --paced-runs 25 \
      --profile-calls 0 --encoders stacked --phases 2>&1 | grep --line-buffered -v -i warning) | tee -a $OUT/act_latency-resident.txt
  done
done
date +%T
