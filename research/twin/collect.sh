#!/bin/bash
# Stop the runs, export each one's last checkpoint (parameters and metadata) and bring back the
# exports and the metrics, each file under 16 MiB.
source research/twin/setup.sh
pkill -f mqe_model.train; sleep 5
for a in $(for s in ${AGENTS:-mqe gcbc gciql}; do echo ${s%%:*}; done); do
  python3 -m mqe_model.export --checkpoint /tmp/w/$a --out /tmp/w/export/$a --overwrite 2>&1 | tail -1
  [ $a = mqe ] && python3 -m mqe_model.transfer pack --checkpoint /tmp/w/$a --out $OUT/$a-state \
    --optimizer-dtype bfloat16 2>&1 | tail -1
  tar czf $OUT/$a.tgz -C /tmp/w/export $a -C /tmp/w/$a metrics.jsonl
done
tar czf $OUT/logs.tgz -C /tmp/w $(for s in ${AGENTS:-mqe gcbc gciql}; do echo ${s%%:*}.log; done) datagen.log
ls -la $OUT
