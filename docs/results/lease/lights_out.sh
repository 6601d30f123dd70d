#!/bin/bash
# lights_out.sh (carry .whl .whl4; one call, ~7 minutes): issue 9. The lights-out toy
# (mqe_model.toy.lights_out, ogbench.md section 32) in the sizes and lengths a 2-core VM cannot train:
# each RUN "name:args" in its own process, all at once on the one GPU, one log each (all in
# $OUT/lights_out.tgz: $OUT takes 8 files), then the table. STAGGER=s starts the runs s seconds apart. .whl4 holds tyro and its two needs (cp .whl2/{tyro,docstring_parser,typeguard}*.whl .whl4/).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .whl4/*.whl
export PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
date +%T; nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
mkdir -p /tmp/lo-runs
IFS=';' read -ra runs <<< "${RUNS:?RUNS=\"name:args;name:args\"}"
for run in "${runs[@]}"; do
  name=${run%%:*}; args=${run#*:}
  timeout ${LIMIT:-400} python3 -m mqe_model.toy.lights_out $args > /tmp/lo-runs/$name.log 2>&1 &
  sleep ${STAGGER:-0}  # a fresh machine autotunes each process's GEMMs: staggered starts do not all tune at once
done
wait; date +%T
for run in "${runs[@]}"; do
  name=${run%%:*}; echo "== $name: ${run#*:}"; grep -E "^trained|^Spearman|^mean learned|^far goals" /tmp/lo-runs/$name.log || tail -3 /tmp/lo-runs/$name.log
done
tar -czf $OUT/lights_out.tgz -C /tmp lo-runs
