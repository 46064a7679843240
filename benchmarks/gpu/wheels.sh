#!/usr/bin/env bash
# Download the wheels torchpace needs that the GPU machine lacks, for its Python 3.12 on
# manylinux x86_64, into DEST (default .whl, git-ignored); then, where a python3.12 is found
# here, rehearse the device's install (--no-index --no-deps --target) and import with it.
#
#   bash benchmarks/gpu/wheels.sh [DEST]        # run it in the checkout the device call sends
#
# What is missing there: torchpace's dependencies are torch, numpy, msgspec, isal, rich,
# matplotlib (nvidia-ml-py for [gpu]; tomli only below 3.11); the device image has all but
# msgspec and isal (/work/.library/device/KINDS.md, "Python packages already there"), and
# neither has a required dependency of its own (their METADATA lists only extras).
# The versions are the ones this project's own machines run.
set -euo pipefail
cd "$(dirname "$0")/../.."
DEST=${1:-.whl}
WHEELS=(msgspec==0.22.0 isal==1.9.1)
PY=${PY:-python3}
if [[ -x .venv/bin/python ]]; then PY=.venv/bin/python; fi

mkdir -p "$DEST"
# One version of each: two of a package stop the device's whole install.
for spec in "${WHEELS[@]}"; do rm -f "$DEST/${spec%%==*}"-*.whl; done
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 \
  manylinux1_x86_64; do platforms+=(--platform "$p"); done
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  "${platforms[@]}" -d "$DEST" "${WHEELS[@]}"
ls -l "$DEST"

# The rehearsal: the device's own install command, with a Python 3.12 of this machine.
is312() { "$1" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; }
PY312=${PY312:-}
if [[ -z $PY312 ]]; then  # a pyenv shim may name a version it will not run: try each
  for candidate in $(command -v python3.12 2>/dev/null) "$HOME"/.pyenv/versions/3.12*/bin/python3.12; do
    if is312 "$candidate"; then PY312=$candidate; break; fi
  done
fi
if [[ -z $PY312 ]] || ! is312 "$PY312"; then
  echo "no python3.12 here: the install was not rehearsed (set PY312=/path/to/python3.12)"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The package as it installs (its wheel: package data, entry point), beside the carried wheels.
"$PY" -m pip wheel -q --no-deps --no-build-isolation -w "$tmp/dist" . >/dev/null
"$PY312" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target "$tmp/site" "$DEST"/*.whl "$tmp"/dist/torchpace-*.whl
PYTHONPATH="$tmp/site" "$PY312" - <<'PYEOF'
import sys

import isal.igzip
import msgspec

import torchpace

print(f"python {sys.version.split()[0]}: torchpace {torchpace.__version__}, "
      f"msgspec {msgspec.__version__}, isal {isal.__version__}: installed and imported")
PYEOF
# analyze needs no torch: the installed package reads a gzipped trace end to end under 3.12.
PYTHONPATH="$tmp/site" "$PY312" -m torchpace analyze examples/slow_loader.pt.trace.json.gz \
  --format json -o "$tmp/report.json"
"$PY312" - "$tmp/report.json" <<'PYEOF'
import json
import sys

doc = json.load(open(sys.argv[1]))
print(f"analyze under python3.12: {len(doc['findings'])} findings, {len(doc['skipped'])} rules skipped")
PYEOF
