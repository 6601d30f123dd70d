#!/bin/bash
# wheels3.sh: builds .whl3, the serving wheels the issue-6 calls carry beside .whl (`serve10.sh` and the
# other `*6.sh`, `serve*.sh` scripts install both into /tmp/site): FastAPI and uvicorn for the server,
# pycurl for the benchmarks' robots (robot_client.http), tyro for the benchmarks' flags. CPython 3.12 on
# x86_64 Linux, the device machines' Python. Run from the repository root on this side.
set -e
rm -rf .whl3
python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any \
  -d .whl3 fastapi starlette uvicorn httptools pydantic pydantic-core annotated-types typing-inspection \
  typing_extensions opentelemetry-api importlib_metadata tyro docstring-parser typeguard pycurl
du -sh .whl3
