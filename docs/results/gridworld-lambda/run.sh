#!/bin/bash
# Lambda against trajectory length in the gridworld (CPU), issue #9's question at toy scale. The toy's
# gamma 0.95 (horizon ~20 steps) stands for OGBench's 0.995 (~200): lambda 0.5 (waypoints ~2 steps ahead)
# for the paper's 0.95 (~20), lambda 0.9 (~10) for 0.99 (~100). Short trajectories (6000 episodes of 6
# steps, stitch-like) against long ones (400 of 100, the toy's default; 5x the horizon, like scene-play's
# 1001 steps against 200), and long ones with the goal offset capped at 6 steps (max_goal_offset), 3 seeds
# each, two runs at a time; one log per run here. ogbench.md section 28 has the table.
cd "$(dirname "$0")/../../.."
run() {  # name seed data-args overrides...
  local name=$1 seed=$2 data=$3; shift 3
  JAX_PLATFORMS=cpu .venv/bin/python -m mqe_model.toy.gridworld $data --seed $seed --set "$@" \
    > docs/results/gridworld-lambda/$name-seed$seed.log 2>&1
}
short="--episodes 6000 --episode-length 6"
long="--episodes 400 --episode-length 100"
for seed in 0 1 2; do
  run short-lam0.5 $seed "$short" lam=0.5 &
  run short-lam0.9 $seed "$short" lam=0.9; wait
  run long-lam0.5 $seed "$long" lam=0.5 &
  run long-lam0.9 $seed "$long" lam=0.9; wait
  run long-goal6-lam0.5 $seed "$long" lam=0.5 max_goal_offset=6 &
  run long-goal6-lam0.9 $seed "$long" lam=0.9 max_goal_offset=6; wait
done
