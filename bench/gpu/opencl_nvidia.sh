#!/usr/bin/env bash
# refmnn's OpenCL backend on an NVIDIA GPU, through the driver's own OpenCL library: what
# `refmnn backends` sees, the conformance suite (every declared case against the reference) and
# the zoo benchmark next to onnxruntime and PyTorch (on the CPU and on CUDA), all written to
# OUT_DIR.
#
#   bench/gpu/opencl_nvidia.sh OUT_DIR [WHEEL_DIR]
#
# For a machine with no network (a lent GPU box): python3 must already have numpy, onnx,
# ml_dtypes, torch (the zoo's exports) and onnxruntime; pyopencl and what it needs (pytools,
# siphash24, platformdirs, mako, markupsafe) come as wheels in WHEEL_DIR. refmnn itself is
# installed from this checkout into a scratch folder, so that its entry points (the backends)
# are registered. No NVIDIA ICD file needs to exist: one is written for the loader that
# pyopencl's wheel ships (OCL_ICD_VENDORS), naming libnvidia-opencl wherever the driver put it.
# Each step has its own time limit (CONFORMANCE_S, BENCH_S seconds) so that a slow one still
# leaves the others' results; a conformance run stopped at its limit still writes its report,
# of the cases it reached. The conformance runs with the launch-configuration tuning off
# (CONFORMANCE_ARGS, default --option tune=off): tuning builds and times every candidate launch
# configuration, a program each. On the H200 of 2026-11-26, with tuning on, 14-15 workers reached
# 482 cases in 210 s and 783 in 410 s; on PoCL here, tuning off took a MatMul/Gemm/Conv subset
# from 55.8 to 45.6 s. The zoo benchmark runs the tuned configurations, one worker process per
# engine (PROCESSES, default 1: three, refmnn bench's default, triple the loads, which the
# BENCH_S limit of a lent machine cannot spare). BENCH_S=0 skips the zoo and the benchmark: the
# conformance alone, e.g. CONFORMANCE_ARGS='--option tune=off --ops Abs,Tanh --checks value,error'.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: $0 OUT_DIR [WHEEL_DIR]}
wheels=${2:-}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
site=$(mktemp -d)
if [ -n "$wheels" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" \
        "$wheels"/*.whl || exit 1
fi
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile \
    --target "$site" . >"$out/install.log" 2>&1 || { cat "$out/install.log"; exit 1; }
export PYTHONPATH=$site
lib=$(ldconfig -p 2>/dev/null | awk '/libnvidia-opencl\.so/ {print $NF; exit}')
[ -n "$lib" ] || lib=$(find / -xdev -name 'libnvidia-opencl.so*' 2>/dev/null | head -1)
[ -n "$lib" ] || lib=$(find /usr/local/nvidia /usr/lib /usr/lib64 -name 'libnvidia-opencl.so*' 2>/dev/null | head -1)
echo "NVIDIA OpenCL library: ${lib:-not found}" | tee "$out/machine.txt"
if [ -n "$lib" ]; then
    mkdir -p "$site/vendors" && echo "$lib" >"$site/vendors/nvidia.icd"
    export OCL_ICD_VENDORS=$site/vendors
fi
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  python3 -c "import pyopencl as cl; [print(p.name, p.version, '|', d.name, d.version, '| fp16:', 'cl_khr_fp16' in d.extensions, '| fp64:', 'cl_khr_fp64' in d.extensions) for p in cl.get_platforms() for d in p.get_devices()]"
  python3 -m refmnn backends; } 2>&1 | tee -a "$out/machine.txt"
timeout -s INT -k 30 "${CONFORMANCE_S:-240}" python3 -m refmnn conformance --backend opencl -q -n "${WORKERS:-8}" \
    ${CONFORMANCE_ARGS---option tune=off} --report "$out/conformance" >"$out/conformance.log" 2>&1
echo "conformance exit $? (124: stopped at ${CONFORMANCE_S:-240} s)"; tail -3 "$out/conformance.log"
[ "${BENCH_S:-300}" = 0 ] && exit 0
models=${MODELS:-resnet18 mobilenet_v2 squeezenet1_1 vit_tiny bert6}
# the zoo, exported once (torch) before anything is timed
python3 -c "import sys; from refmnn import zoo; [zoo.export_onnx(n) for n in sys.argv[1:]]" \
    $models >"$out/zoo.log" 2>&1 || tail -20 "$out/zoo.log"
timeout -s INT -k 30 "${BENCH_S:-300}" python3 -m refmnn bench $models \
    --backends reference,opencl --peers onnxruntime,torch,torch-cuda --threads "${THREADS:-16}" \
    --repeat "${REPEAT:-30}" --processes "${PROCESSES:-1}" --out "$out/bench" --no-progress 2>&1 | tee "$out/bench.log" | tail -40
