#!/bin/bash
# Twin data and the three agents, started in the background (they outlive this call, not the
# machine):  bash research/twin/train.sh EPISODES STEPS
# Primitive demonstrations only; MQE, GCBC and GCIQL on the same data, side by side on the one GPU.
source research/twin/setup.sh
episodes=$1 steps=$2 W=/tmp/w
mkdir -p $W
s=$(date +%s)
python3 -m robot_client.sim.datagen --out $W/data --episodes $episodes --workers $(nproc) --seed 0 --overwrite 2>&1 | tail -2
echo "data: $(( $(date +%s) - s )) s"
for a in mqe gcbc gciql; do
  XLA_PYTHON_CLIENT_MEM_FRACTION=0.3 setsid nohup python3 -m mqe_model.train --agent $a --preset sim \
    --data $W/data --workdir $W/$a --steps $steps --seed 0 --image-size 64 --save-every 25000 \
    --log-every 5000 --no-progress > $W/$a.log 2>&1 < /dev/null &
done
sleep 150; bash research/twin/poll.sh 0
