#!/bin/bash
# Wait SECONDS, then each run's last metrics line (step, updates/s, losses, critic distances); with PACK="mqe ...",
# those runs' latest checkpoints packed into $OUT/<agent>-state (mqe-transfer, bf16 moments) to resume
# from on another machine if this one is lost; with STEPS="20000 ...", those kept checkpoints of each
# run exported into $OUT/<agent>-<step>.tgz while the runs go on (a lost machine still leaves them).
[ -d /tmp/w ] || { echo "no runs here: this machine is not the one run.sh started them on"; exit 1; }
source research/twin/setup.sh
sleep ${1:-0}
for a in $(agent_names); do
  echo "$a: $(tail -1 /tmp/w/$a/metrics.jsonl 2>/dev/null | python3 -c "import json,sys; d=json.loads(sys.stdin.read() or '{}'); print({k: round(v, 4) if isinstance(v, float) else v for k, v in d.items() if k in ('step', 'perf/steps_per_s', 'critic/loss', 'actor/mse', 'actor/loss', 'critic/dist_all', 'critic/latent_spread_sq')})")"
  grep -i "error\|Traceback" /tmp/w/$a.log | tail -2
  for step in $STEPS; do export_step $a $step; done
done
nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader
for a in $PACK; do pack_state $a; done
