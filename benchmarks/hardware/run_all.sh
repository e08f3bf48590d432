#!/usr/bin/env bash
# Run the whole hardware harness, each stage under its own time limit, logs beside results.
# Usage: benchmarks/hardware/run_all.sh OUTDIR [--quick]
#   STAGES="env microbench own_kernels operators trace ncu layer_ncu" (default: all, in order)
#   T_<STAGE>=seconds overrides a stage's limit (e.g. T_OWN_KERNELS=300);
#   DEADLINE=seconds caps the whole run: a stage gets at most what is left (less 10 s).
# A stage that fails or runs out of time leaves what it wrote (tables are rewritten row by
# row) and the next stage runs; OUTDIR/stages.txt lists each stage's exit status.
set -u
out=$1; shift
quick=("$@")
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cd "$repo"
mkdir -p "$out"
export PYTHONUNBUFFERED=1
stages=${STAGES:-env microbench own_kernels operators trace ncu layer_ncu}

NCU_METRICS=gpu__time_duration.sum,sm__cycles_elapsed.avg,sm__cycles_elapsed.max,\
sm__cycles_elapsed.avg.per_second,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active,\
l1tex__t_sector_hit_rate.pct,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,dram__bytes_write.sum,\
launch__registers_per_thread,launch__occupancy_limit_registers,launch__waves_per_multiprocessor

run_stage() {
    local name=$1 limit=$2; shift 2
    local t0=$SECONDS
    if [ -n "${DEADLINE:-}" ]; then
        local left=$((DEADLINE - SECONDS - 10))
        if [ "$left" -lt 20 ]; then echo "$name skipped: deadline" | tee -a "$out/stages.txt"; return; fi
        if [ "$left" -lt "$limit" ]; then limit=$left; fi
    fi
    echo "=== $name (limit ${limit}s)"
    timeout -k 10 "$limit" "$@" >"$out/$name.log" 2>&1
    local rc=$?
    echo "$name rc=$rc seconds=$((SECONDS - t0))" | tee -a "$out/stages.txt"
    tail -n 4 "$out/$name.log"
}

env_stage() {
    nvidia-smi -q >"$out/nvidia_smi_q.txt" 2>&1
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,power.limit,temperature.gpu --format=csv
    nvcc --version
    ncu --version
    python3 -c 'import torch, cupy, numpy; print("torch", torch.__version__, torch.version.cuda, "cupy", cupy.__version__, "numpy", numpy.__version__)'
}

for s in $stages; do
    case $s in
        env) run_stage env "${T_ENV:-60}" bash -c "$(declare -f env_stage); out=$out; env_stage" ;;
        microbench) run_stage microbench "${T_MICROBENCH:-120}" python3 "$here/microbench.py" --out "$out" "${quick[@]}" ;;
        own_kernels) run_stage own_kernels "${T_OWN_KERNELS:-240}" python3 "$here/own_kernels.py" --out "$out" "${quick[@]}" ;;
        operators) run_stage operators "${T_OPERATORS:-180}" python3 "$here/operators.py" --out "$out" "${quick[@]}" ;;
        trace) run_stage trace "${T_TRACE:-90}" python3 "$here/layer_trace.py" --out "$out" "${quick[@]}" ;;
        ncu)
            regex=$(python3 -c 'import sys; sys.path.insert(0, "."); from workloads.kernels.catalog import KERNELS; print("|".join(KERNELS))')
            run_stage ncu "${T_NCU:-240}" ncu --clock-control none --csv --page raw \
                --metrics "$NCU_METRICS" -k "regex:^(${regex})$" --log-file "$out/ncu_raw.csv" \
                python3 "$here/own_kernels.py" --ncu-launches --deadline-s "${NCU_DEADLINE:-200}" \
                "${quick[@]}" ;;
        layer_ncu)
            run_stage layer_ncu "${T_LAYER_NCU:-240}" ncu --profile-from-start off \
                --clock-control none --csv --page raw \
                --metrics "$(python3 "$here/layer_ncu.py" --metrics)" \
                -k "regex:$(python3 "$here/layer_ncu.py" --kernels)" \
                --log-file "$out/layer_ncu_raw.csv" python3 "$here/layer_ncu.py" --run
            python3 "$here/layer_ncu.py" --table "$out/layer_ncu_raw.csv" "$out/layer_ncu.csv" ;;
        *) echo "unknown stage $s" ;;
    esac
done
