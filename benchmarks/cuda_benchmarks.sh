#!/usr/bin/env bash
# CPU vs GPU on one machine: per-step seconds of orthobo / qlogei (benchmarks/step_benchmark.py
# at n0 = 32, 100 and 256) and fit seconds by training-set size
# (benchmarks/fit_device_benchmark.py, the measurement behind CPU_FIT_MAX_POINTS), then the CUDA
# tests. One torch thread, as `orthobench run` gives each cell by default. docs/benchmarks.md,
# "CUDA", quotes its output.
#
#   benchmarks/cuda_benchmarks.sh OUTDIR
#
# About 6 minutes on an H200 machine; each part is stopped by its own time limit (9 minutes in all);
# its tables are printed and written to OUTDIR/*.txt. Run it from the repository root.
source "$(dirname "$0")/_device.sh" "$@"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "cpu cores: $(nproc)"
python3 -c "import torch, botorch, gpytorch; print('torch', torch.__version__, 'botorch', botorch.__version__, 'gpytorch', gpytorch.__version__)"
# The default (raw samples screened on 64 draws) and the paper's screen on all draws; the coarse
# stage does not run on a GPU.
gp_methods="orthobo fit=fast,orthobo fit=fast screen=all"
timed 100 step_n32 python3 benchmarks/step_benchmark.py --seeds 2 --steps 4 --devices cpu,cuda \
  --methods "$gp_methods"
timed 80 step_n100 python3 benchmarks/step_benchmark.py --seeds 1 --steps 3 --n0 100 --devices cpu,cuda \
  --methods "$gp_methods"
timed 90 step_n256 python3 benchmarks/step_benchmark.py --seeds 1 --steps 3 --n0 256 \
  --devices cpu,cuda --methods "orthobo fit=fast"
timed 80 fit_device python3 benchmarks/fit_device_benchmark.py --seeds 1 --sizes 32,64,128,256,512,1024
timed 70 fit_device_crossing python3 benchmarks/fit_device_benchmark.py --seeds 2 --sizes 96,128,160,192,256
timed 120 cuda_tests python3 -m pytest -q -p no:cacheprovider -m cuda tests
