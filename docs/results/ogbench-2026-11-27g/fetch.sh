#!/bin/bash
# Call 4: waits for the 50k evaluation (up to $1 seconds), then packs logs, metrics and the report.
W=/tmp/sweep; end=$(( $(date +%s) + $1 ))
while [ $(date +%s) -lt $end ] && pgrep -f mqe_model.ogbench.evaluate > /dev/null; do sleep 3; done
date +%T; tail -5 $W/logs/eval-allpairs-50k.log | cut -c1-400; cat $W/eval-allpairs-50k.json 2>/dev/null | head -c 3000
tar czf $OUT/sweep.tgz -C $W --exclude=checkpoints --exclude=data --exclude=jax-cache .
