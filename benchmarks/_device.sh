# Sourced by the device scripts as `source "$(dirname "$0")/_device.sh" "$@"`: takes the one
# argument OUTDIR (made; exits 2 with the usage otherwise) as $out, puts the repository root and
# benchmarks/ on PYTHONPATH with unbuffered Python output, and defines
# `timed SECONDS NAME COMMAND...`, which runs COMMAND under a time limit, prints its output and
# keeps it in "$out/NAME.txt", then reports its exit status and wall time.
set -uo pipefail
if [[ $# -ne 1 ]]; then
  echo "usage: $0 OUTDIR" >&2
  exit 2
fi
out=$1
mkdir -p "$out"
export PYTHONPATH=$PWD:$PWD/benchmarks${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
timed() {
  local limit=$1 name=$2 start
  shift 2
  start=$(date +%s)
  timeout "$limit" "$@" 2>&1 | tee "$out/$name.txt"
  echo "$name: exit ${PIPESTATUS[0]}, $(( $(date +%s) - start )) s"
}
