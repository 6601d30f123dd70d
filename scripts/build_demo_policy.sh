#!/usr/bin/env bash
# Rebuilds the bundled demo policy (mqe_model/demo/checkpoint/) and the GCBC and GCIQL baselines
# trained on the same data, on one GPU. The run behind the committed policy is recorded in
# mqe_model/demo/README.md (steps, seed, machine, wall time).
#   bash scripts/build_demo_policy.sh WORKDIR [STEPS] [EPISODES]
# WORKDIR receives data/ (the twin's primitive demonstrations), mqe/, gcbc/ and gciql/ (training runs) and
# export/ (serving-only copies: parameters and metadata). PYTHON overrides the interpreter.
set -euo pipefail
work="${1:?usage: bash scripts/build_demo_policy.sh WORKDIR [STEPS]}"
steps="${2:-200000}"
episodes="${3:-6000}"
py="${PYTHON:-python3}"
seed=0
export MUJOCO_GL="${MUJOCO_GL:-egl}"

start=$(date +%s)
"$py" -m robot_client.sim.datagen --out "$work/data" --episodes "$episodes" --workers "$(nproc)" \
  --seed "$seed" --overwrite
echo "data: $(( $(date +%s) - start )) s"

# The three agents share the GPU: none saturates it, so side by side they take far less wall time.
common=(--data "$work/data" --preset sim --steps "$steps" --seed "$seed" --image-size 64
        --save-every 20000 --log-every 5000 --no-progress)
start=$(date +%s)
pids=()
for agent in mqe gcbc gciql; do
  XLA_PYTHON_CLIENT_MEM_FRACTION=0.3 "$py" -m mqe_model.train --agent "$agent" --workdir "$work/$agent" \
    "${common[@]}" > "$work/$agent.log" 2>&1 &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done
echo "training: $(( $(date +%s) - start )) s for $steps steps"

for agent in mqe gcbc gciql; do
  "$py" -m mqe_model.export --checkpoint "$work/$agent" --out "$work/export/$agent" --overwrite
done
