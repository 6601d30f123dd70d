#!/bin/bash
# The supervised read-out of ogbench.md section 33 on the VM, one run at a time: MQE's psi fitted to the
# true presses (`--target presses`), logs beside this script. Run from the repository root.
out=docs/results/lights-out/vm-fit
run() { name=$1; shift; JAX_PLATFORMS=cpu .venv/bin/python -m mqe_model.toy.lights_out --target presses "$@" > $out/$name.log 2>&1; }
run fit-tiny-4x4-s0 --seed 0
run fit-tiny-3x3-s0 --seed 0 --side 3
run fit-ogb-4x4-s0 --seed 0 --preset ogbench_state --lr 3e-4 --steps 10000
run fit-ogb-3x3-s0 --seed 0 --side 3 --preset ogbench_state --lr 3e-4 --steps 10000
