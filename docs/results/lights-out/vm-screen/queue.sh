#!/bin/bash
# Which part of MQE's critic loss caps lights out (ogbench.md section 35), screened on the VM's 2 cores,
# two runs at a time: `bash docs/results/lights-out/vm-screen/queue.sh NAME:ARGS ...` from the repository
# root, each NAME's log beside this script.
out=docs/results/lights-out/vm-screen
run() { name=${1%%:*}; IFS=' ' read -r -a args <<< "${1#*:}"
  JAX_PLATFORMS=cpu timeout 3000 .venv/bin/python -m mqe_model.toy.lights_out "${args[@]}" > $out/$name.log 2>&1; }
while [ $# -gt 0 ]; do
  run "$1" & [ $# -gt 1 ] && run "$2" & wait; shift; [ $# -gt 0 ] && shift
done
