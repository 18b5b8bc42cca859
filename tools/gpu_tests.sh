#!/usr/bin/env bash
# The GPU half of the test suite in one run, on a machine with a CUDA or XPU device (CI has none):
#   1. every `gpu`-marked test of the kernels and the core (Triton and flash-linear-attention kernels
#      against their references, the engine's graphs, fp8, the fused MoE forms);
#   2. the kernel and model tests with BRINGUP_TEST_DEVICE set: each family's model on the device
#      against transformers on the CPU, the reference kernels on the device.
#
#   tools/gpu_tests.sh [--device cuda|xpu] [--workers N] [--out DIR] [--timeout SECONDS]
#
# PYTHON picks the interpreter (default python3; e.g. PYTHON="python3 -P" where the package is
# installed elsewhere and the checkout's bare bringup/ must not shadow it). With pytest-xdist the
# tests run in N workers sharing the device (default 8); with pytest-timeout a test past --timeout
# (default 300 s) fails with every thread's stack, so a stall names its place. A cold Triton cache
# makes the first run slow: flash-linear-attention autotunes dozens of configs per kernel (a model
# test of a KDA, GDN or Mamba2 family took over 30 s on an H200); TRITON_CACHE_DIR kept between
# runs makes the next one fast. Each part's log goes to DIR (default ./gpu-tests), the summary to stdout.
set -u
device=cuda workers=8 out=gpu-tests timeout=300
while [ $# -gt 0 ]; do
  case $1 in
    --device) device=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    *) echo "gpu_tests.sh: unknown argument $1 (see the comment at the top)" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."
mkdir -p "$out"
py=${PYTHON:-python3}
opts=(-p no:cacheprovider -q -rfE --tb=short)
$py -c "import xdist" 2>/dev/null && [ "$workers" -gt 1 ] && opts+=(-n "$workers")
$py -c "import pytest_timeout" 2>/dev/null && opts+=(--timeout "$timeout")
status=0
run() {  # name, then pytest's arguments
  local name=$1; shift
  local start=$SECONDS
  $py -m pytest "${opts[@]}" "$@" > "$out/$name.log" 2>&1 || status=1
  echo "$name ($((SECONDS - start)) s): $(grep -E '[0-9]+ (passed|failed|skipped|errors?)\b|no tests ran' "$out/$name.log" | tail -1)"
  grep -E '^(FAILED|ERROR) ' "$out/$name.log"
}
run gpu-marked -m gpu tests/kernels tests/core
BRINGUP_TEST_DEVICE=$device run on-device -m "not gpu" tests/kernels tests/core/engine/models
exit $status
