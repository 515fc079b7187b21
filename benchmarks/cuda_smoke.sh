#!/usr/bin/env bash
# The CUDA path end to end, on a machine with a GPU and the project's dependencies installed:
# the CUDA tests, then suites/smoke.yaml and suites/orthobo-smoke.yaml with --device cuda.
#
#   benchmarks/cuda_smoke.sh OUTDIR [SUITE_TIMEOUT_SECONDS]
#
# Results go to OUTDIR/<suite>/ (Parquet files and report.html); per-(task, optimizer) fit and
# acquisition seconds per BO step and the mean final regret are printed. Each suite run is
# stopped after SUITE_TIMEOUT_SECONDS (default 240); the cells stored by then are summarized.
# Run it from the repository root.
set -uo pipefail
if [[ $# -lt 1 || $# -gt 2 ]]; then
  echo "usage: $0 OUTDIR [SUITE_TIMEOUT_SECONDS]" >&2
  exit 2
fi
out=$1
suite_timeout=${2:-240}
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, botorch; print('torch', torch.__version__, 'botorch', botorch.__version__)"
python3 -m pytest -q -p no:cacheprovider -m cuda tests 2>&1 | tail -n 3
for suite in smoke orthobo-smoke; do
  start=$(date +%s)
  timeout "$suite_timeout" python3 -m orthobench run "suites/$suite.yaml" --device cuda \
    -o "$out/$suite" -q 2>&1 | tail -n 2
  echo "$suite wall $(( $(date +%s) - start )) s"
  python3 - "$out/$suite" <<'PY'
import sys
from pathlib import Path

from orthobench.results import load_runs, read_metadata

d = Path(sys.argv[1])
df = load_runs([d])
if len(df):
    print("device in metadata:", read_metadata(sorted((d / "runs").glob("*.parquet"))[0])["device"])
    bo = df[df.phase == "bo"]
    t = bo.groupby(["task", "optimizer"])[["fit_seconds", "acq_seconds"]].mean()
    last = df.sort_values("iteration").groupby(["task", "optimizer", "seed"]).tail(1)
    print(t.join(last.groupby(["task", "optimizer"]).regret.mean()).round(3).to_string())
PY
done
