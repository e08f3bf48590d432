#!/usr/bin/env bash
# Hardware only: L2/TMA read bandwidth (l2_bandwidth_hw.cu) and ncu of the calibration's cuBLAS
# GEMMs (gemm_ncu_l2.py). Usage: benchmarks/hardware/l2_gemm_run.sh OUTDIR
set -u
out=$1
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit \
    --format=csv >"$out/nvidia_smi.csv" 2>&1
nvcc --version | tail -1 >"$out/versions.txt"
ncu --version | tail -1 >>"$out/versions.txt"
python3 -c "import torch; print('torch', torch.__version__)" >>"$out/versions.txt" 2>&1
nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -o /tmp/l2_bw l2_bandwidth_hw.cu \
    && timeout 150 /tmp/l2_bw >"$out/l2_bandwidth.csv" 2>"$out/l2_bandwidth.err"
echo "l2_bw rc=$?"; cat "$out/l2_bandwidth.csv"
M=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,lts__cycles_elapsed.avg.per_second
M=$M,lts__t_bytes.sum,lts__t_bytes.sum.peak_sustained,lts__t_bytes.sum.per_second
M=$M,lts__t_sectors_srcunit_tex_op_read.sum,dram__bytes_read.sum
M=$M,lts__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed
run_ncu() {
    timeout 200 ncu --clock-control none --section LaunchStats "$@" \
        --kernel-name regex:'nvjet|gemm|xmma|cutlass' --csv python3 gemm_ncu_l2.py \
        >"$out/gemm_ncu_l2.csv" 2>"$out/gemm_ncu_l2.err"
}
run_ncu --metrics "$M"
echo "ncu rc=$?"
if ! grep -q gpu__time_duration "$out/gemm_ncu_l2.csv"; then
    echo "ncu fallback to sections"
    run_ncu --section SpeedOfLight --section MemoryWorkloadAnalysis
    echo "ncu fallback rc=$?"
fi
grep -c '"' "$out/gemm_ncu_l2.csv"; tail -3 "$out/gemm_ncu_l2.err"
