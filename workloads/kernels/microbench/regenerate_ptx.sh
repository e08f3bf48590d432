#!/usr/bin/env bash
# Regenerate every workloads/kernels/microbench/X.ptx from X.cu with nvcc (CUDA 13).
#
# Same convention as ../regenerate_ptx.sh: each X.cu names its exact command on one header
# line, the only place its flags live:
#   // ptx: nvcc -ptx -O3 -arch=sm_90 X.cu -o X.ptx
# This script runs that command from this directory; tests/test_microbench_kernels.py parses
# the same line and checks the committed PTX against a fresh compile when nvcc is on PATH.
# Usage: workloads/kernels/microbench/regenerate_ptx.sh [X.cu ...]   (default: every .cu here)
set -euo pipefail
cd "$(dirname "$0")"
command -v nvcc >/dev/null || { echo "regenerate_ptx.sh: nvcc not found on PATH" >&2; exit 1; }

sources=("$@")
if [ ${#sources[@]} -eq 0 ]; then
    sources=(*.cu)
fi

for src in "${sources[@]}"; do
    src=$(basename "$src")
    stem=${src%.cu}
    line=$(grep -m1 '^// ptx: ' "$src" || true)
    cmd=${line#// ptx: }
    pattern="^nvcc -ptx -O3 -arch=sm_90a? ${stem}\.cu -o ${stem}\.ptx$"
    if ! [[ $cmd =~ $pattern ]]; then
        echo "regenerate_ptx.sh: $src: header line must read" \
             "'// ptx: nvcc -ptx -O3 -arch=sm_90[a] $stem.cu -o $stem.ptx', got '$line'" >&2
        exit 1
    fi
    echo "$cmd"
    read -r -a argv <<<"$cmd"
    "${argv[@]}"
done
