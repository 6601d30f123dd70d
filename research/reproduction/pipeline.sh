#!/bin/bash
# pipeline.sh STEPS: started in the background by call2.sh; runs on after the call returns. Waits for
# call 1's scene-play-v0 data, points OGBench's dataset path at it, then trains at once on the one GPU:
# ours (mqe-ogbench train, 2 vmapped seeds, its own evaluation at STEPS) and the public code (2 seeds, one
# process each, main.py); as each public run saves params_STEPS.pkl and exits, its 5 tasks are scored
# by 5 peer_eval.py processes at once. Touching $W/eval-now scores the public runs' latest checkpoint
# instead of waiting (the fallback when time runs out). Writes $W/pipeline.done at the end.
STEPS=${1:-200000}
R=$(cd "$(dirname "$0")" && pwd)
W=${W:-/tmp/sweep}; EPISODES=${EPISODES:-50}; mkdir -p $W/logs $W/peer $W/peer-eval
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
log() { echo "$(date +%T) $*"; }
while [ ! -f $W/data/scene-play-v0.json ]; do sleep 5; done
log "data ready: $(tail -1 $W/logs/data-scene-play-v0.log | cut -c1-200)"
# The public code's distrax: the real one if it imports here, else the stand-in (reported in the log).
python3 -c "import distrax" > $W/logs/distrax-import.txt 2>&1 || { export PYTHONPATH=$R/stub_distrax:$PYTHONPATH; log "real distrax failed to import: stand-in used"; }
mkdir -p ~/.ogbench/data
ln -sf $W/data/scene-play-v0.npz ~/.ogbench/data/scene-play-v0.npz
ln -sf $W/data/scene-play-v0-val.npz ~/.ogbench/data/scene-play-v0-val.npz

(cd /tmp/repo && XLA_PYTHON_CLIENT_MEM_FRACTION=0.3 setsid nohup python3 -m mqe_model.ogbench train scene-play-v0 \
  --agent mqe --seeds 0 1 --vmap-seeds --steps $STEPS --eval-start $STEPS --eval-every $STEPS --eval-episodes $EPISODES --eval-workers 10 \
  --set matmul_precision=tensorfloat32 --data $W/data/scene-play-v0.npz --runs-dir $W/runs --no-progress \
  > $W/logs/ours.log 2>&1 < /dev/null &)
log "ours started"
for s in 0 1; do
  SAVE_INTERVAL=${SAVE_INTERVAL:-50000} XLA_PYTHON_CLIENT_MEM_FRACTION=0.2 setsid nohup bash $R/peer_train.sh $s $STEPS $W/peer/seed$s \
    > $W/logs/peer-seed$s.log 2>&1 < /dev/null &
  echo $! > $W/peer-seed$s.pid
done
log "public seeds 0 1 started"

evaluate() {  # evaluate SEED STEP: the 5 tasks at once
  local s=$1 step=$2
  for t in 1 2 3 4 5; do
    JAX_PLATFORMS=cpu setsid nohup python3 $R/peer_eval.py --peer /tmp/peer --run "$W/peer/seed$s/OGBench/peer/sd00${s}_*" \
      --step $step --seed $s --task $t --episodes $EPISODES --alpha 1.0 --out $W/peer-eval/seed$s-step$step-task$t.json \
      > $W/logs/peer-eval-seed$s-task$t.log 2>&1 < /dev/null &
  done
  log "public seed $s: evaluating step $step"
}
latest() { ls $W/peer/seed$1/OGBench/peer/*/params_*.pkl 2>/dev/null | sed 's/.*params_\([0-9]*\).pkl/\1/' | sort -n | tail -1; }
declare -A done_seed
while [ ${#done_seed[@]} -lt 2 ]; do
  for s in 0 1; do
    [ -n "${done_seed[$s]:-}" ] && continue
    if ! kill -0 $(cat $W/peer-seed$s.pid) 2> /dev/null; then
      step=$(latest $s); log "public seed $s exited; latest checkpoint ${step:-none}"
      [ -n "$step" ] && evaluate $s $step; done_seed[$s]=1
    elif [ -f $W/eval-now ] && [ -n "$(latest $s)" ]; then
      step=$(latest $s); log "eval-now: public seed $s at checkpoint $step"
      sleep 3; evaluate $s $step; done_seed[$s]=1
    fi
  done
  sleep 5
done
while pgrep -f "[p]eer_eval.py" > /dev/null || pgrep -f "[m]qe_model.(ogbench|train)" > /dev/null; do sleep 5; done
python3 $R/tabulate.py $W > $W/table.md 2>&1
log "pipeline done"; touch $W/pipeline.done
