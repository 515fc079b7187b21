#!/usr/bin/env bash
# The batch (q > 1) path on a GPU: the CUDA tests (the nested marginal qEI and the batch step among
# them), the per-step seconds of OrthoBO at q = 1 and 4 against qLogEI on the CPU and the GPU of
# one machine (benchmarks/step_benchmark.py), the wall seconds per step of cnn cells on digits
# whose q evaluations train at once on the GPU, one worker process each
# (benchmarks/batch_wall_time.py). One torch thread per process. docs/benchmarks.md, "Batch steps
# on a GPU", quotes its output; benchmarks/dask_gpu_share.sh is the Dask case.
#
#   benchmarks/cuda_batch.sh OUTDIR
#
# At most 9 minutes: each part is stopped by its own time limit (a first run on an H100 machine
# stopped all three at limits of 130, 120 and 80 s, the step benchmark half way). The outputs are
# printed and written to OUTDIR/*.txt. Run it from the repository root.
source "$(dirname "$0")/_device.sh" "$@"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "cpu cores: $(nproc)"
python3 -c "import torch, botorch; print('torch', torch.__version__, 'botorch', botorch.__version__)"
timed 150 cuda_tests python3 -m pytest -q -p no:cacheprovider -m cuda tests
timed 240 step_q python3 benchmarks/step_benchmark.py --seeds 2 --steps 2 --q 1,4 \
  --devices cpu,cuda --methods "orthobo fit=fast"
timed 150 wall_cnn python3 benchmarks/batch_wall_time.py --task cnn-digits --optimizer orthobo \
  --q 1,4 --seeds 1 --steps 2 --device cuda -o "$out/wall"
