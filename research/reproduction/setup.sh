#!/bin/bash
# Device set-up, run at the start of every call from the repository root: the carried wheel folders
# (.whl2: OGBench, MuJoCo 3.2.7, dm_control, tyro...; .whlp: distrax, tfp, ml_collections for the public
# code; .whl: flax, optax, orbax...) into /tmp/site, each once; the tree copied to /tmp/repo; the carried
# public impls/ tree (.peer/impls) copied to /tmp/peer.
for d in .whl2 .whlp .whl; do
  [ -d $d ] && [ ! -f /tmp/$d.done ] && python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --upgrade --target /tmp/site $d/*.whl 2>&1 | tail -2 && touch /tmp/$d.done
done
mkdir -p /tmp/repo && tar --exclude=.whl --exclude=.whl2 --exclude=.whlp --exclude=.peer --exclude=.git -cf - . | tar -xf - -C /tmp/repo
[ -d .peer/impls ] && [ ! -d /tmp/peer ] && cp -r .peer/impls /tmp/peer
true
