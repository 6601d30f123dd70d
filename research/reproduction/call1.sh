#!/bin/bash
# Step 1 (needs the wheels in .whl2 and .whlp and the public tree in .peer): set-up; scene-play-v0 generated (OGBench's settings, seed 0) in the
# background on 13 workers; meanwhile a smoke test of the public code on 4 generated episodes: 2000
# updates on the GPU (its updates/s alone) and one evaluation episode on the CPU.
set -u
bash research/reproduction/setup.sh
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
W=/tmp/sweep; mkdir -p $W/logs $W/data $W/smoke
(date +%T; nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv; nproc; free -g
 python3 -c "import jax, mujoco; print('jax', jax.__version__, jax.devices(), 'mujoco', mujoco.__version__)") > $W/logs/machine.txt 2>&1
cat $W/logs/machine.txt
cd /tmp/repo && setsid nohup python3 -m mqe_model.ogbench data scene-play-v0 --out-dir $W/data --seed 0 \
  --workers 13 --no-progress > $W/logs/data-scene-play-v0.log 2>&1 < /dev/null &
python3 -m mqe_model.ogbench data scene-play-v0 --out-dir $W/tiny --seed 1 --episodes 4 --workers 1 --no-progress 2>&1 | tail -1
mkdir -p ~/.ogbench/data && ln -sf $W/tiny/scene-play-v0.npz ~/.ogbench/data/scene-play-v0.npz && \
  ln -sf $W/tiny/scene-play-v0-val.npz ~/.ogbench/data/scene-play-v0-val.npz
python3 -c "import distrax, ml_collections, flax, optax; print('distrax', distrax.__version__, 'flax', flax.__version__, 'optax', optax.__version__)" 2>&1 | tail -2
python3 -c "import distrax" > /dev/null 2>&1 || { export PYTHONPATH=$(pwd)/research/reproduction/stub_distrax:$PYTHONPATH; echo "real distrax failed: stand-in used"; }
LOG_INTERVAL=500 XLA_PYTHON_CLIENT_MEM_FRACTION=0.2 timeout 240 bash research/reproduction/peer_train.sh 0 4000 $W/smoke \
  > $W/logs/peer-smoke.log 2>&1
echo "peer smoke rc=$?"; grep -v -i "warn\|it/s\]" $W/logs/peer-smoke.log | tail -5 | cut -c1-300
python3 research/reproduction/peer_speed.py $W/smoke/OGBench/peer/sd000_*/train.csv
JAX_PLATFORMS=cpu timeout 120 python3 research/reproduction/peer_eval.py --peer /tmp/peer \
  --run "$W/smoke/OGBench/peer/sd000_*" --step 4000 --seed 0 --task 1 --episodes 1 --out $W/smoke/eval.json 2>&1 | tail -1
date +%T; tail -1 $W/logs/data-scene-play-v0.log | cut -c1-200
tar czf $OUT/call1.tgz -C $W logs smoke/eval.json $(cd $W && ls smoke/OGBench/peer/*/train.csv 2>/dev/null)
