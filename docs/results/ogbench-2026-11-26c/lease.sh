#!/bin/bash
# Sixth-session lease: quiet serve benchmark, then scene-play data, then the three agents' runs.
set -u
W=/tmp/sweep; mkdir -p $W/logs $W/done $W/data $W/bench
export JAX_COMPILATION_CACHE_DIR=$W/jax-cache
cd /tmp/repo
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $W/bench/gpu.txt 2>&1
timeout 200 python3 -m benchmarks.serve_latency --preset bridge --robots 1 --seconds 15 > $W/bench/serve_latency-bridge-1robot.txt 2>&1
echo "exit $?" >> $W/bench/serve_latency-bridge-1robot.txt
date > $W/logs/data-start
python3 -m mqe_model.ogbench.generate scene-play-v0 --out-dir $W/data --workers 16 --no-progress > $W/logs/data-scene-play-v0.log 2>&1 || { echo "data failed" > $W/done/data; exit 1; }
date > $W/logs/data-end
D=$(ls $W/data/scene-play-v0*.npz | grep -v -- -val.npz | head -1)
for a in gcbc gciql mqe; do
  CUDA_VISIBLE_DEVICES=0 XLA_PYTHON_CLIENT_MEM_FRACTION=0.3 setsid bash -c "python3 -m mqe_model.ogbench.reproduce scene-play-v0 --agent $a --preset ogbench_state --seeds 0 1 2 3 --vmap-seeds --steps 100000 --eval-every 10000 --eval-start 80000 --eval-workers 8 --data $D --runs-dir $W/runs --no-progress; echo \$? > $W/done/scene-play-v0-$a" > $W/logs/scene-play-v0-$a.log 2>&1 < /dev/null &
done
