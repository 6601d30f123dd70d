#!/bin/bash
# poll.sh SECONDS [STEP]: wait up to SECONDS or until both GPUs' queues are empty and idle, report every run,
# pack the runs (no checkpoints, no data) into $OUT; with STEP also each run's params and metadata of that
# checkpoint (to evaluate elsewhere with mqe-ogbench-eval).
W=/tmp/sweep; end=$(( $(date +%s) + $1 ))
idle() { [ -z "$(ls $W/queue/*/*.job 2>/dev/null)" ] && ! pgrep -f mqe_model.ogbench.reproduce > /dev/null; }
while [ $(date +%s) -lt $end ] && ! idle; do sleep 5; done
date +%T; cat $W/logs/sweep.log; uptime; nvidia-smi --query-gpu=utilization.gpu,memory.used,clocks.sm --format=csv,noheader
tail -2 $W/logs/data-scene-play-v0.log | cut -c1-300
for m in $W/runs/*/scene-play-v0/mqe/seed*/metrics.jsonl; do
  [ -f $m ] || continue
  python3 - "$m" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
last = [r for r in rows if "perf/steps_per_s" in r][-1:]
evals = [(r["step"], round(100 * r["eval/success"], 1), [round(100 * r[k], 1) for k in sorted(r) if k.startswith("eval/seed") and k.endswith("_success")])
         for r in rows if "eval/success" in r]
crit = {k.split("/")[-1]: round(float(v), 3) for k, v in (last[0] if last else {}).items() if k.startswith("critic/dist") or k == "actor/mse"}
print(sys.argv[1].split("/")[-5], "step", last[0]["step"] if last else None,
      "steps/s", round(last[0]["perf/steps_per_s"]) if last else None, "evals", evals, crit)
PY
done
for f in $W/runs/*/scene-play-v0/mqe/*.log; do [ -f $f ] && grep -iE "error|traceback|failed" $f | tail -3; done
tar czf $OUT/sweep.tgz -C $W --exclude=checkpoints --exclude=data --exclude=jax-cache --exclude=queue .
if [ -n "$2" ]; then
  for s in $W/runs/*/scene-play-v0/mqe/seed*/; do
    [ -d $s/checkpoints/$2 ] || continue
    v=$(echo $s | awk -F/ '{print $(NF-4)}'); n=$(basename $s)
    tar czf $OUT/params-$v-$n-$2.tgz -C $s checkpoints/$2/params checkpoints/$2/metadata 2>&1 | tail -2
  done
  ls -la $OUT
fi
