#!/bin/bash
# Ninth-session lease (4 x H200, 64 CPUs): the scripts as run, concatenated. Calls: (1) setup.sh with the
# ogbench/MuJoCo wheels, then data.sh; (2) setup.sh with the JAX-side wheels, then runs.sh and poll.sh;
# (3) poll.sh; (4) reeval.py on the four runs whose evaluation pool broke (see ogbench.md section 7).

# --- setup.sh
# Set-up on the device machine: GL libraries (once), the carried wheels into /tmp/site, a copy of the repo in /tmp/repo.
[ -f /tmp/gl.done ] || { for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig; touch /tmp/gl.done; }
for d in .whl .whl2; do
  [ -d $d ] && python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $d/*.whl 2>&1 | tail -2
done
mkdir -p /tmp/repo && tar --exclude=.whl --exclude=.whl2 --exclude=.gl --exclude=.git -cf - . | tar -xf - -C /tmp/repo

# --- data.sh
# Ninth-session lease, call 1: scene-play-v0 data (MuJoCo 3.2.7, seed 0, official size) on 60 workers.
W=/tmp/sweep; mkdir -p $W/logs $W/data $W/done
(nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv; nproc; free -g; python3 -c "import mujoco, jax; print('mujoco', mujoco.__version__, 'jax', jax.__version__)") > $W/logs/machine.txt 2>&1
cd /tmp/repo && setsid nohup python3 -m mqe_model.ogbench.generate scene-play-v0 --out-dir $W/data --workers 60 --no-progress > $W/logs/data-scene-play-v0.log 2>&1 < /dev/null &
sleep 20; cat $W/logs/machine.txt; tail -3 $W/logs/data-scene-play-v0.log

# --- runs.sh
# Ninth-session lease, call 2: scene-play ablations once the data exists; 4 vmapped seeds per run,
# two runs per GPU, one evaluation (5 tasks x 50 episodes per seed) at the run's last update.
W=/tmp/sweep; cd /tmp/repo
export JAX_COMPILATION_CACHE_DIR=$W/jax-cache
while [ ! -f $W/data/scene-play-v0.json ]; do sleep 2; done
echo "$(date +%T) data ready" >> $W/logs/sweep.log
workers=$(python3 -c "from mqe_model.ogbench.sweep_plan import evaluation_workers as w; print(w($(nproc), 7))")
start() {  # start GPU VARIANT AGENT STEPS [--set ...]
  gpu=$1 variant=$2 agent=$3 steps=$4; shift 4
  echo "$(date +%T) start $variant $agent $steps on GPU $gpu ($workers eval workers): $*" >> $W/logs/sweep.log
  CUDA_VISIBLE_DEVICES=$gpu XLA_PYTHON_CLIENT_MEM_FRACTION=0.45 setsid bash -c \
    "python3 -m mqe_model.ogbench.reproduce scene-play-v0 --agent $agent --preset ogbench_state --seeds 0 1 2 3 \
     --vmap-seeds --steps $steps --eval-every $steps --eval-workers $workers --data $W/data/scene-play-v0.npz \
     --runs-dir $W/$variant --no-progress $*; echo \$? > $W/done/$variant-$agent" \
    > $W/logs/$variant-$agent.log 2>&1 < /dev/null &
}
start 0 default mqe 100000
start 0 farthest mqe 100000 --set actor_heads=farthest
start 1 no-actor-ln mqe 100000 --set actor_layer_norm=false
start 1 farthest-no-actor-ln mqe 100000 --set actor_heads=farthest actor_layer_norm=false
start 2 ogbench-baselines gciql 100000
start 2 ogbench-baselines gcbc 100000
start 3 default-200k mqe 200000
echo "$(date +%T) all started" >> $W/logs/sweep.log

# --- poll.sh
# poll.sh SECONDS RUNS: wait up to SECONDS (or until RUNS runs are done), report, pack the sweep into $OUT.
W=/tmp/sweep; end=$(( $(date +%s) + $1 ))
while [ $(date +%s) -lt $end ] && [ $(ls $W/done 2>/dev/null | wc -l) -lt $2 ]; do sleep 5; done
cat $W/logs/sweep.log; for f in $W/done/*; do echo "done $f: $(cat $f)"; done
uptime; free -g | sed -n 2p; nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader
tail -2 $W/logs/data-scene-play-v0.log | cut -c1-300
for f in $W/logs/*-mqe.log $W/logs/*-gc*.log; do [ -f $f ] && { echo "== $f"; tail -n 2 $f | cut -c1-300; }; done
for m in $(find $W -name metrics.jsonl); do echo "== $m $(wc -l < $m) lines; $(tail -1 $m | cut -c1-150)"; grep success $m | tail -1 | cut -c1-400; done
tar czf $OUT/sweep.tgz -C $W --exclude=checkpoints --exclude=data --exclude=jax-cache .
ls -la $OUT

# --- reeval.py (run as: JAX_PLATFORMS=cpu python3 reeval.py 60 farthest-no-actor-ln farthest default no-actor-ln;
# the last two did not finish inside the lease)
# """Re-run the final evaluation of the ablation runs whose evaluation pool crashed (one shared pool)."""
# import json, sys
# from pathlib import Path
# from mqe_model import checkpoints
# from mqe_model.evaluation import OGBenchEvaluator
# 
# def main():
#     runs = [Path(f"/tmp/sweep/{v}/scene-play-v0/mqe/seeds0-3") for v in sys.argv[2:]]
#     ev = OGBenchEvaluator("scene-play-v0", 50, int(sys.argv[1]), 0)
#     for run in runs:
#         step_dir = checkpoints.step_dirs(run / "checkpoints")[100000]
#         ev.submit(100000, "mqe", checkpoints.read_metadata(step_dir), checkpoints.restore_params(step_dir))
#     for run, (step, result) in zip(runs, ev.finish()):
#         with open(run / "metrics.jsonl", "a") as f:
#             f.write(json.dumps({"step": step, **result}) + "\n")
#         print(run, result, flush=True)
# 
# 
# if __name__ == "__main__":
#     main()
