#!/usr/bin/env bash
# Regenerate every X.ptx from X.cu with nvcc (CUDA 13), in workloads/kernels/,
# workloads/kernels/microbench/, workloads/kernels/comm/ and workloads/kernels/aten/.
#
# Each X.cu names its exact commands on header lines, the only place its flags live:
#   // ptx: nvcc -ptx -O3 -arch=sm_90 X.cu -o X.ptx
#   // ptx: nvcc -ptx -O3 -arch=sm_80 X.cu -o X.sm_80.ptx
# (-arch=sm_90a only for a file that needs the Hopper-only instructions; -arch=sm_80 for the
# microbenchmarks, whose PTX is the same for both generations and must run on a100_sxm too,
# whose chip.isa_target refuses a higher .target. The second line, the Ampere build an
# a100_sxm op loads (workloads.kernels.case.load_ptx), is absent from the files whose kernels
# need FP8, which an A100 lacks.) This script runs
# those commands from the file's directory; tests/test_ptx_current.py and
# tests/test_microbench_kernels.py parse the same lines.
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
    mapfile -t lines < <(grep '^// ptx: ' "$dir/$src" || true)
    if [ ${#lines[@]} -eq 0 ]; then
        echo "regenerate_ptx.sh: $src: no '// ptx: nvcc ...' header line" >&2
        exit 1
    fi
    for line in "${lines[@]}"; do
        cmd=${line#// ptx: }
        pattern="^nvcc -ptx -O3 -arch=(sm_(80|90a?)) ${stem}\.cu -o ${stem}(\.sm_80)?\.ptx$"
        if ! [[ $cmd =~ $pattern ]] || { [ -n "${BASH_REMATCH[3]}" ] && \
                [ "${BASH_REMATCH[3]}" != ".${BASH_REMATCH[1]}" ]; }; then
            echo "regenerate_ptx.sh: $src: header line must read" \
                 "'// ptx: nvcc -ptx -O3 -arch=sm_80|sm_90[a] $stem.cu -o $stem.ptx'" \
                 "or '... -arch=sm_80 $stem.cu -o $stem.sm_80.ptx', got '$line'" >&2
            exit 1
        fi
        echo "($dir) $cmd"
        read -r -a argv <<<"$cmd"
        (cd "$dir" && "${argv[@]}")
    done
done
