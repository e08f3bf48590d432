#!/usr/bin/env bash
# Regenerate every X.ptx from X.cu with nvcc (CUDA 13), in workloads/kernels/,
# workloads/kernels/microbench/, workloads/kernels/comm/ and workloads/kernels/aten/.
#
# Each X.cu names its exact command on one header line, the only place its flags live:
#   // ptx: nvcc -ptx -O3 -arch=sm_90 X.cu -o X.ptx
# (-arch=sm_90a only for a file that needs the Hopper-only instructions; -arch=sm_80 for the
# microbenchmarks, whose PTX is the same for both generations and must run on a100_sxm too,
# whose chip.isa_target refuses a higher .target.) This script runs
# that command from the file's directory; tests/test_ptx_current.py and
# tests/test_microbench_kernels.py parse the same line.
# Usage: workloads/kernels/regenerate_ptx.sh [PATH/X.cu ...]   (default: every .cu in all four)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
command -v nvcc >/dev/null || { echo "regenerate_ptx.sh: nvcc not found on PATH" >&2; exit 1; }

sources=("$@")
if [ ${#sources[@]} -eq 0 ]; then
    sources=("$here"/*.cu "$here"/microbench/*.cu "$here"/comm/*.cu "$here"/aten/*.cu)
fi

for path in "${sources[@]}"; do
    dir=$(cd "$(dirname "$path")" && pwd)
    src=$(basename "$path")
    stem=${src%.cu}
    line=$(grep -m1 '^// ptx: ' "$dir/$src" || true)
    cmd=${line#// ptx: }
    pattern="^nvcc -ptx -O3 -arch=sm_(80|90a?) ${stem}\.cu -o ${stem}\.ptx$"
    if ! [[ $cmd =~ $pattern ]]; then
        echo "regenerate_ptx.sh: $src: header line must read" \
             "'// ptx: nvcc -ptx -O3 -arch=sm_80|sm_90[a] $stem.cu -o $stem.ptx', got '$line'" >&2
        exit 1
    fi
    echo "($dir) $cmd"
    read -r -a argv <<<"$cmd"
    (cd "$dir" && "${argv[@]}")
done
