#!/bin/bash
# poll.sh SECONDS [PARAMS_STEP]: wait up to SECONDS or until the row is done, report, pack the runs (no checkpoints,
# no data) into $OUT; with PARAMS_STEP also each seed's params and metadata of that checkpoint (a fallback: the
# evaluation can then run elsewhere).
W=/tmp/sweep; end=$(( $(date +%s) + $1 ))
while [ $(date +%s) -lt $end ] && [ ! -f $W/done/mqe ]; do sleep 5; done
date +%T; cat $W/logs/sweep.log; uptime; nvidia-smi --query-gpu=utilization.gpu,memory.used,clocks.sm --format=csv,noheader
tail -2 $W/logs/data-scene-play-v0.log | cut -c1-300; tail -3 $W/logs/repro-mqe.log | cut -c1-400
for m in $W/runs/scene-play-v0/mqe/seed*/metrics.jsonl; do
  [ -f $m ] || continue
  python3 - "$m" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
last = [r for r in rows if "perf/steps_per_s" in r][-1:]
evals = [(r["step"], round(100 * r["eval/success"], 1)) for r in rows if "eval/success" in r]
print(sys.argv[1].split("/")[-2], "step", last[0]["step"] if last else None,
      "steps/s", round(last[0]["perf/steps_per_s"]) if last else None, "evals", evals)
PY
done
for f in $W/runs/scene-play-v0/mqe/*.log; do [ -f $f ] && grep -iE "evaluation at|error|traceback|failed" $f | tail -3; done
tar czf $OUT/sweep.tgz -C $W --exclude=checkpoints --exclude=data --exclude=jax-cache .
if [ -n "$2" ]; then
  for s in $W/runs/scene-play-v0/mqe/seed*/; do
    n=$(basename $s); tar czf $OUT/params-$n-$2.tgz -C $s checkpoints/$2/params checkpoints/$2/metadata 2>&1 | tail -2
  done
  ls -la $OUT
fi
