#!/bin/bash
# serve9.sh: issue 6 (carry .whl .whl3; ~8-9 minutes). One robot at 5 Hz with this session's defaults
# (twin encoders, matmul convolutions, CUDA graphs of any size): the periodic keeper every 5 and 2 ms
# against none (the in-process act was 0.69-1.08x at 2 ms, bench-2026-12-01g), then where XLA still cuts
# the twin matmul act into separate launches: its optimised HLO, dumped with XLA's default graph size and
# with graphs of any size: its kernels by fusion kind, and its thunk sequences (where the command buffers
# are formed: the thirtieth session found none in the optimised HLO itself) by kind and nesting.
# Between them, the act with its frame in and answer out through pinned host memory (`--io host`,
# PolicyRuntime's host_io: the copies inside the compiled act) against separate transfers, with its phases.
# KEEPERS and SIZES override the two lists, NO_IO=1 skips the act (KEEPERS= SIZES="1 5" NO_IO=1: the dumps alone).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .whl3/*.whl
export PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1
date +%T
for keeper in ${KEEPERS-0 5 2}; do
  echo "== 1 robot, --keep-warm-ms $keeper $(date +%T)"
  timeout 150 python3 -m benchmarks.serve_latency --preset bridge --robots 1 --seconds 10 --keep-warm-ms $keeper 2>&1 \
    | grep --line-buffered -v -i warning
done | tee $OUT/serve_latency-keepers.txt
if [ -z "${NO_IO+x}" ]; then  # the act with its frame and answer through pinned host memory (host_io) against transfers
  echo "== act_latency --io device host $(date +%T)"
  XLA_FLAGS=--xla_gpu_graph_min_graph_size=1 timeout 200 python3 -m benchmarks.act_latency --preset bridge --runs 100 \
    --paced-runs 20 --profile-calls 10 --encoders twin --convs matmul --io device host --phases 2>&1 \
    | grep --line-buffered -v -i warning | tee $OUT/act_latency-host-io.txt
fi
for size in ${SIZES-5 1}; do
  dump=/tmp/dump-$size
  XLA_FLAGS="--xla_gpu_graph_min_graph_size=$size --xla_dump_to=$dump --xla_dump_hlo_module_re=jit_act --xla_dump_hlo_as_text" \
    timeout 150 python3 -m benchmarks.act_latency --preset bridge --runs 20 --paced-runs 3 --profile-calls 0 \
    --encoders twin --convs matmul 2>&1 | grep -v -i warning | tail -3
  date +%T
  mkdir -p $OUT/hlo-$size && ls $dump > $OUT/hlo-$size/listing.txt
  cp $dump/*jit_act*after_optimizations.txt $dump/*jit_act*thunk_sequence*.txt $OUT/hlo-$size/ 2>/dev/null
  python3 docs/results/lease/command_buffers.py $OUT/hlo-$size/*after_optimizations.txt $OUT/hlo-$size/*thunk_sequence*.txt \
    | tee $OUT/command-buffers-$size.txt | head -60
  gzip -q $OUT/hlo-$size/*.txt
done
date +%T
