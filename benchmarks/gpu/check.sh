#!/usr/bin/env bash
# The one-call GPU check (issues 27, 28): install the carried wheels, then run check.py.
#   bash benchmarks/gpu/check.sh --wheels .whl [check.py options]   # on the GPU machine
#   bash benchmarks/gpu/check.sh --rehearse [check.py options]      # here, CPU-sized
# Uses the machine's own python3 (the device's holds torch 2.11 + CUDA); for --rehearse the
# project's .venv when there is one. PY=... overrides both; SITE=... the wheels' folder (/tmp/site).
# See benchmarks/gpu/README.md.
set -u
t0=$(date +%s)
cd "$(dirname "$0")/../.."
wheels="" rehearse=0 args=()
while (($#)); do
  case $1 in
    --wheels) wheels=${2:?--wheels needs a folder}; shift 2 ;;
    --rehearse) rehearse=1; args+=("$1"); shift ;;
    *) args+=("$1"); shift ;;
  esac
done
if [[ -z ${PY:-} ]]; then
  PY=python3
  if ((rehearse)) && [[ -x .venv/bin/python ]]; then PY=.venv/bin/python; fi
fi
site=""
if [[ -n $wheels ]]; then
  # The device reaches no index: msgspec and isal (what torchpace needs beyond the device's own
  # packages) travel as wheels and go into a folder of their own, ahead on PYTHONPATH.
  site=${SITE:-/tmp/site}
  log=/tmp/torchpace-gpu-wheels.log
  if "$PY" -m pip install --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target "$site" "$wheels"/*.whl >"$log" 2>&1; then
    echo "wheels: installed $(ls "$wheels" | tr '\n' ' ')"
  else
    echo "wheels: install FAILED (see $log); going on: steps needing them will fail"; tail -5 "$log"
  fi
  args+=(--setup-log "$log")
fi
# The checkout's own source, not an installed copy: the device runs exactly this commit.
export PYTHONPATH="$PWD/src${site:+:$site}${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
exec "$PY" benchmarks/gpu/check.py --t0 "$t0" "${args[@]}"
