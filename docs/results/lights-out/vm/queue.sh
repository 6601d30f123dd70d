#!/bin/bash
# Two lights-out runs at a time on the VM's 2 cores.
cd "$(git rev-parse --show-toplevel)"
run() { name=$1; shift; JAX_PLATFORMS=cpu timeout 1500 .venv/bin/python -m mqe_model.toy.lights_out "$@" > docs/results/lights-out/vm/$name.log 2>&1; }
run onehot-s0 --seed 0  # ran first, alone
run onehot-s1 --seed 1 & run signed-s0 --seed 0 --encoding signed & wait
run side3-s0 --seed 0 --side 3 & run signed-s1 --seed 1 --encoding signed & wait
run onehot-60k-s0 --seed 0 --steps 60000 & (run wide-s0 --seed 0 --set critic_hidden_dims=256,256,256 latent_dim=256; run side3-s1 --seed 1 --side 3) & wait
