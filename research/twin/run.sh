#!/bin/bash
# One call: twin data generated in the background while the sim preset's training speed is measured
# (bf16 against its float32 encoder, bare update and full loop), then
# the agents started on that data side by side (they outlive this call, not the machine: start the
# next call at once).
#   [AGENTS="mqe mqe_f32 gcbc:100000"] [SET_mqe_f32="key=value ..."] [SAVE_EVERY=10000] [KEEP=3] \
#     bash research/twin/run.sh EPISODES STEPS [CALL_SECONDS]
# Each run is named AGENT or AGENT_VARIANT (its workdir /tmp/w/NAME); one given as NAME:steps stops
# there instead of at STEPS. SET_<NAME>: that run's config overrides (research/README.md, twin);
# KEEP: checkpoints each run keeps (poll.sh and collect.sh STEPS export them).
# A run moved here by mqe-transfer
# (carried .moved/<name>/, from poll.sh or collect.sh on an earlier machine) resumes from it.
source research/twin/setup.sh
episodes=$1 steps=$2 call_s=${3:-560} W=/tmp/w
mkdir -p $W; t0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader; nproc
(python3 -m robot_client.sim.datagen --out $W/data --episodes $episodes --workers $(nproc) --seed 0 \
   --overwrite > $W/datagen.log 2>&1 && touch $W/data.done || touch $W/data.failed
 echo "data: $(( $(date +%s) - t0 )) s" >> $W/datagen.log) &
bench="python3 -m benchmarks.train_throughput --preset sim --image-size 64"
$bench --baseline encoder=impala_small --profile 12 --json $OUT/throughput.json 2>&1 | grep -v -i "warn\|^ *$"
while [ ! -f $W/data.done ]; do  # no data, no training: stop the call here
  [ -f $W/data.failed ] && { echo "datagen failed:"; tail -5 $W/datagen.log; exit 1; }; sleep 2
done; tail -2 $W/datagen.log
for spec in ${AGENTS:-mqe gcbc gciql}; do
  a=${spec%%:*} n=${spec#*:}; [ "$n" = "$spec" ] && n=$steps
  set_var=SET_$a; overrides=(); [ -n "${!set_var}" ] && overrides=(--set ${!set_var})
  if [ -f .moved/$a/manifest.json ]; then
    python3 -m mqe_model.transfer unpack --parts .moved/$a --workdir $W/$a && overrides+=(--resume) || exit 1
  fi
  XLA_PYTHON_CLIENT_MEM_FRACTION=0.3 setsid nohup python3 -m mqe_model.train --agent ${a%%_*} --preset sim \
    --data $W/data --workdir $W/$a --steps $n --seed 0 --image-size 64 --save-every ${SAVE_EVERY:-10000} \
    --keep ${KEEP:-3} --log-every 5000 --no-progress "${overrides[@]}" > $W/$a.log 2>&1 < /dev/null &
done
sleep $(( call_s - ($(date +%s) - t0) )); bash research/twin/poll.sh 0
