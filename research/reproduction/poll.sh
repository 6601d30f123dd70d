#!/bin/bash
# poll.sh SECONDS [params]: waits up to SECONDS or until the pipeline is done, reports every run, and packs
# logs, metrics, public train/eval CSVs and evaluation JSONs (no checkpoints, no data) into $OUT.
# With "params" also the latest params of each run (ours: the orbax step's params and metadata; public: the
# network parameters alone, pickled), in 15 MiB parts (`cat NAME.* > NAME`), for scoring elsewhere.
W=${W:-/tmp/sweep}; end=$(( $(date +%s) + $1 ))
while [ $(date +%s) -lt $end ] && [ ! -f $W/pipeline.done ]; do sleep 5; done
date +%T; uptime; nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader
tail -8 $W/logs/pipeline.log
tail -2 $W/logs/ours.log | cut -c1-300
for m in $W/runs/*/*/seed*/metrics.jsonl; do
  [ -f $m ] && python3 - "$m" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
last = [r for r in rows if "perf/steps_per_s" in r][-1:]
evals = [(r["step"], {k: round(100 * v, 1) for k, v in r.items() if k.startswith("eval/success")}) for r in rows if any(k.startswith("eval/success") for k in r)]
print("ours", "step", last[0]["step"] if last else None, "steps/s", round(last[0]["perf/steps_per_s"]) if last else None, "evals", evals)
PY
done
python3 $(dirname "$0")/peer_speed.py $W/peer/seed*/OGBench/peer/*/train.csv 2>/dev/null
for f in $W/logs/peer-seed*.log; do grep -iE "error|traceback" $f | tail -3; done
cat $W/peer-eval/*.json 2>/dev/null; echo
[ -f $W/table.md ] && cat $W/table.md
tar czf $OUT/results.tgz -C $W --exclude=checkpoints --exclude=data --exclude=tiny --exclude='*.pkl' --exclude=jax-cache .
if [ "$2" = params ]; then
  for c in $W/runs/*/*/seed*/checkpoints; do
    step=$(ls $c | grep -E '^[0-9]+$' | sort -n | tail -1); [ -n "$step" ] || continue
    tar czf - -C ${c%/checkpoints} checkpoints/$step/params checkpoints/$step/metadata | split -b 15M - $OUT/ours-params-$step.tgz.
  done
  for s in 0 1; do
    p=$(ls $W/peer/seed$s/OGBench/peer/*/params_*.pkl 2>/dev/null | sort -V | tail -1); [ -n "$p" ] || continue
    PYTHONPATH=/tmp/site python3 -c "import pickle,sys; d=pickle.load(open(sys.argv[1],'rb')); pickle.dump(d['agent']['network']['params'], open(sys.argv[2],'wb'))" \
      $p /tmp/peer-seed$s-$(basename $p) && split -b 15M /tmp/peer-seed$s-$(basename $p) $OUT/peer-seed$s-$(basename $p).
  done
  ls -la $OUT
fi
