#!/bin/bash
# Image training speed on the sim preset: the bf16 preset against its float32 encoder, each agent;
# losses of the two on one GPU batch; a datagen smoke run (twin episodes/s on the machine's cores).
source research/twin/setup.sh
nvidia-smi --query-gpu=name --format=csv,noheader; nproc
python3 -c "import jax, mujoco; print('jax', jax.__version__, jax.devices(), 'mujoco', mujoco.__version__)"
f() { grep -v -i "warn\|^ *$" ; }
python3 -m benchmarks.train_throughput --preset sim --image-size 64 --baseline encoder=impala_small \
  --profile 25 --json $OUT/mqe.json 2>&1 | f
for a in gcbc gciql; do
  python3 -m benchmarks.train_throughput --agent $a --preset sim --image-size 64 --bare-only \
    --baseline encoder=impala_small --json $OUT/$a.json 2>&1 | f
done
python3 research/twin/loss_precision.py 2>&1 | f
s=$(date +%s); timeout 120 python3 -m robot_client.sim.datagen --out /tmp/d --episodes 64 --workers 16 --seed 0 2>&1 | tail -2
echo "datagen 64 episodes: $(( $(date +%s) - s )) s"
