#!/bin/bash
# poll.sh SECONDS [PARAMS_STEP]: call 3 and later (no carry needed). Waits up to SECONDS or until no run
# is left, reports every run, and packs logs, metrics and tables (no checkpoints, no data) into $OUT.
# With PARAMS_STEP (e.g. 1000000, for the lease's last call when evaluations may not finish) also each
# run's params and metadata of that checkpoint, in 15 MiB parts (`cat params-*.tgz.* | tar xzf -`), so
# `mqe-ogbench-eval` can score it elsewhere under the data's MuJoCo.
W=/tmp/sweep; end=$(( $(date +%s) + $1 ))
while [ $(date +%s) -lt $end ] && pgrep -f "mqe_model.(ogbench|train)" > /dev/null; do sleep 5; done
date +%T; uptime; nvidia-smi --query-gpu=utilization.gpu,memory.used,clocks.sm --format=csv,noheader
tail -4 $W/logs/ablate.log | cut -c1-400
for m in $W/runs*/*/*/*/seed*/metrics.jsonl $W/runs*/*/*/seed*/metrics.jsonl; do
  [ -f $m ] || continue
  python3 - "$m" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
last = [r for r in rows if "perf/steps_per_s" in r][-1:]
evals = [(r["step"], round(100 * r["eval/success"], 1)) for r in rows if "eval/success" in r]
crit = {k.split("/")[-1]: round(float(v), 3) for k, v in (last[0] if last else {}).items() if k.startswith("critic/dist_pos") or k == "actor/mse"}
print(sys.argv[1].split("/")[-5], sys.argv[1].split("/")[-2], "step", last[0]["step"] if last else None,
      "steps/s", round(last[0]["perf/steps_per_s"]) if last else None, "evals", evals, crit)
PY
done
cat $W/runs*/*-ablation.md 2>/dev/null
for f in $W/runs*/*/*/*/*.log; do [ -f $f ] && grep -iE "error|traceback" $f | tail -3; done
tar czf $OUT/sweep.tgz -C $W --exclude=checkpoints --exclude=data --exclude=jax-cache .
if [ -n "$2" ]; then
  for c in $W/runs*/*/*/seed*/checkpoints/$2 $W/runs*/*/*/*/seed*/checkpoints/$2; do
    [ -d $c ] || continue
    n=$(echo ${c%/checkpoints/*} | sed "s|$W/||; s|/|-|g")
    tar czf - -C ${c%/checkpoints/*} checkpoints/$2/params checkpoints/$2/metadata | split -b 15M - $OUT/params-$n-$2.tgz.
  done
  ls -la $OUT
fi
