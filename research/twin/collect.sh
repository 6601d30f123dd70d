#!/bin/bash
# Stop the runs, export each one's last checkpoint (parameters and metadata) and bring back the
# exports and the metrics, each file under 16 MiB; with STEPS="75000 ...", those kept steps too
# (<agent>-<step>.tgz).
source research/twin/setup.sh
pkill -f mqe_model.train; sleep 5
for a in $(agent_names); do
  python3 -m mqe_model.export --checkpoint /tmp/w/$a --out /tmp/w/export/$a --overwrite 2>&1 | tail -1
  [ ${a%%_*} = mqe ] && pack_state $a
  tar czf $OUT/$a.tgz -C /tmp/w/export $a -C /tmp/w/$a metrics.jsonl
  for step in $STEPS; do export_step $a $step; done
done
tar czf $OUT/logs.tgz -C /tmp/w $(agent_names | sed 's/$/.log/') datagen.log
ls -la $OUT
