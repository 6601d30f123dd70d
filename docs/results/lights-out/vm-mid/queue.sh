#!/bin/bash
# Section 35's screen at a width between `tiny` and `ogbench_state` (critic and actor 256 x 3, latent 256,
# batch 128, lr 3e-4), two runs at a time on the VM's 2 cores, from the repository root:
#   bash docs/results/lights-out/vm-mid/queue.sh "NAME:FLAGS:SETS" ...
# FLAGS go to mqe-lights-out as they are, SETS (key=value ...) join the widths' --set; logs beside this script.
out=docs/results/lights-out/vm-mid
run() { IFS=: read -r name flags sets <<< "$1"
  JAX_PLATFORMS=cpu timeout 5000 .venv/bin/python -m mqe_model.toy.lights_out $flags --preset ogbench_state --lr 3e-4 \
    --set critic_hidden_dims=256,256,256 latent_dim=256 actor_hidden_dims=256,256,256 batch_size=128 $sets \
    > $out/$name.log 2>&1; }
while [ $# -gt 0 ]; do
  run "$1" & [ $# -gt 1 ] && run "$2" & wait; shift; [ $# -gt 0 ] && shift
done
