# Sourced by the device scripts: `timed SECONDS NAME COMMAND...` runs COMMAND under a time limit,
# prints its output and keeps it in "$out/NAME.txt", then reports its exit status and wall time.
timed() {
  local limit=$1 name=$2 start
  shift 2
  start=$(date +%s)
  timeout "$limit" "$@" 2>&1 | tee "$out/$name.txt"
  echo "$name: exit ${PIPESTATUS[0]}, $(( $(date +%s) - start )) s"
}
