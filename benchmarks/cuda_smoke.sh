#!/usr/bin/env bash
# The CUDA path for real, on a machine with a GPU and the project's dependencies installed:
# CUDA tests, then the smoke and OrthoBO smoke suites with --device cuda; summaries to ${OUT:-.}.
set -uo pipefail
OUT=${OUT:-.}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, botorch; print('torch', torch.__version__, 'botorch', botorch.__version__)"
python3 -m pytest -q -p no:cacheprovider tests/test_cuda.py 2>&1 | tail -n 3
for suite in smoke orthobo-smoke; do
  start=$(date +%s)
  timeout "${SUITE_TIMEOUT:-240}" python3 -m orthobench run "suites/$suite.yaml" --device cuda -o "/tmp/cuda-$suite" -q 2>&1 | tail -n 2
  echo "$suite wall $(( $(date +%s) - start )) s"
  python3 - "$suite" <<'PY'
import sys
import pandas as pd
from orthobench.results import load_runs, read_metadata
from pathlib import Path
d = Path(f"/tmp/cuda-{sys.argv[1]}")
df = load_runs([d])
if len(df):
    print("device in metadata:", read_metadata(sorted((d / "runs").glob("*.parquet"))[0])["device"])
    bo = df[df.phase == "bo"]
    t = bo.groupby(["task", "optimizer"])[["fit_seconds", "acq_seconds"]].mean()
    last = df.sort_values("iteration").groupby(["task", "optimizer", "seed"]).tail(1)
    print(t.join(last.groupby(["task", "optimizer"]).regret.mean()).round(3).to_string())
PY
  cp "/tmp/cuda-$suite/report.html" "$OUT/report-$suite.html" 2>/dev/null
done
