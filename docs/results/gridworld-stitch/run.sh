#!/bin/bash
# A stitch-like gridworld (CPU): 6000 random-walk episodes of 6 steps, so no episode spans a far goal
# (>= 12 steps). The actor's goals and BC term, 3 seeds each; one log per run in this folder, two
# runs at a time. ogbench.md section 18 has the table.
cd "$(dirname "$0")/../../.."
run() {  # name seed alpha overrides...
  local name=$1 seed=$2 alpha=$3; shift 3
  JAX_PLATFORMS=cpu .venv/bin/python -m mqe_model.toy.gridworld --episodes 6000 --episode-length 6 \
    --seed $seed --alpha $alpha ${@:+--set "$@"} > docs/results/gridworld-stitch/$name-seed$seed.log 2>&1
}
for seed in 0 1 2; do
  run own $seed 0.03 &
  run half $seed 0.03 actor_p_random_goal=0.5; wait
  run half-ownbc $seed 0.03 actor_p_random_goal=0.5 actor_bc_on_random_goals=false &
  run half-alpha0.01 $seed 0.01 actor_p_random_goal=0.5; wait
  run half-alpha0.1 $seed 0.1 actor_p_random_goal=0.5 &
  run half-ownbc-alpha0.1 $seed 0.1 actor_p_random_goal=0.5 actor_bc_on_random_goals=false; wait
  run sampled $seed 0.03 actor_goal_pairs=sampled actor_goal_samples=8; wait
done
