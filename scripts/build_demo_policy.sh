#!/usr/bin/env bash
# Rebuilds the bundled demo policy (mqe_model/demo/checkpoint/) and the GCBC baseline trained on
# the same data, on one GPU. The run behind the committed policy is recorded in
# mqe_model/demo/README.md (steps, seed, machine, wall time).
#   bash scripts/build_demo_policy.sh WORKDIR [STEPS]
# WORKDIR receives data/ (the twin's primitive demonstrations), mqe/ and gcbc/ (training runs) and
# export/ (serving-only copies: parameters and metadata). PYTHON overrides the interpreter.
set -euo pipefail
work="${1:?usage: bash scripts/build_demo_policy.sh WORKDIR [STEPS]}"
steps="${2:-30000}"
py="${PYTHON:-python3}"
seed=0
export MUJOCO_GL="${MUJOCO_GL:-egl}"

start=$(date +%s)
"$py" -m robot_client.sim.datagen --out "$work/data" --episodes 3000 --workers "$(nproc)" \
  --seed "$seed" --overwrite
echo "data: $(( $(date +%s) - start )) s"

# Both agents share the GPU: neither saturates it, so running them side by side halves the wall time.
common=(--data "$work/data" --preset sim --steps "$steps" --seed "$seed" --image-size 64
        --save-every 5000 --log-every 1000 --no-progress)
start=$(date +%s)
XLA_PYTHON_CLIENT_MEM_FRACTION=0.45 "$py" -m mqe_model.train --agent mqe --workdir "$work/mqe" \
  "${common[@]}" > "$work/mqe.log" 2>&1 &
mqe_pid=$!
XLA_PYTHON_CLIENT_MEM_FRACTION=0.45 "$py" -m mqe_model.train --agent gcbc --workdir "$work/gcbc" \
  "${common[@]}" > "$work/gcbc.log" 2>&1 &
gcbc_pid=$!
wait "$mqe_pid"
wait "$gcbc_pid"
echo "training: $(( $(date +%s) - start )) s for $steps steps"

for agent in mqe gcbc; do
  "$py" -m mqe_model.export --checkpoint "$work/$agent" --out "$work/export/$agent" --overwrite
done
