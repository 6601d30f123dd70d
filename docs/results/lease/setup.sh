#!/bin/bash
# Device set-up, run at the start of every call: EGL libraries from the carried .gl debs (once), the
# carried wheels (.whl, .whl2, whichever came, each folder once) into /tmp/site, and a copy of the tree
# in /tmp/repo.
[ -f /tmp/gl.done ] || [ ! -d .gl ] || { for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig; touch /tmp/gl.done; }
for d in .whl .whl2; do
  [ -d $d ] && [ ! -f /tmp/$d.done ] && python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --upgrade --target /tmp/site $d/*.whl 2>&1 | tail -2 && touch /tmp/$d.done
done
mkdir -p /tmp/repo && tar --exclude=.whl --exclude=.whl2 --exclude=.gl --exclude=.git -cf - . | tar -xf - -C /tmp/repo
