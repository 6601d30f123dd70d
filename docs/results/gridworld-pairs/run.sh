#!/bin/bash
# The actor's goal pairings on the gridworld toy (CPU): 3 seeds each of own (the default), all,
# sampled K = 8 and distances; one log per run in this folder.
cd "$(dirname "$0")/../../.."
for seed in 0 1 2; do
  for v in own all "sampled actor_goal_samples=8" distances; do
    name=$(echo "$v" | cut -d' ' -f1)
    JAX_PLATFORMS=cpu .venv/bin/python -m mqe_model.toy.gridworld --seed $seed --set actor_goal_pairs=$v \
      > docs/results/gridworld-pairs/$name-seed$seed.log 2>&1
  done
done
