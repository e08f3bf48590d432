"""The committed PTX in workloads/kernels is what nvcc makes from the committed CUDA source.

Each `X.cu` names its commands on `// ptx: nvcc ... X.cu -o X.ptx` header lines (the ones
`regenerate_ptx.sh` runs): the first builds `X.ptx` (sm_90 or sm_90a); a second, where the
kernels mean something on an A100, builds `X.sm_80.ptx` with `-arch=sm_80`. When nvcc is on
PATH, every source is recompiled into a temp dir with each command and the output must equal
the committed file byte for byte (nvcc's PTX is deterministic and holds no paths). Without
nvcc these tests skip.
"""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

KERNEL_DIR = Path(__file__).resolve().parents[1] / "workloads" / "kernels"
SOURCES = sorted([*KERNEL_DIR.glob("*.cu"), *KERNEL_DIR.glob("aten/*.cu")])
COMMAND = re.compile(r"^// ptx: (nvcc -ptx -O3 -arch=(sm_\w+) (\S+)\.cu -o (\S+)\.ptx)$", re.M)
FP8_SOURCES = {"fp8_convert.cu", "mma_fp8.cu", "quantize_block.cu"}
"""Sources whose kernels need FP8 (sm_89+): no sm_80 build."""


def header_commands(source: Path) -> list[list[str]]:
    """The nvcc command lines of `source`: X.ptx's (sm_90[a]) first, then X.sm_80.ptx's."""
    matches = COMMAND.findall(source.read_text())
    assert matches, f"{source.name}: no '// ptx: nvcc -ptx -O3 -arch=sm_90 ...' header line"
    first, *rest = matches
    assert first[1] in ("sm_90", "sm_90a") and first[2] == first[3] == source.stem, (
        f"{source.name}: first header must build {source.stem}.ptx for sm_90[a]")
    for _command, arch, stem, out in rest:
        assert arch == "sm_80" and stem == source.stem and out == f"{stem}.sm_80", (
            f"{source.name}: a second header builds {source.stem}.sm_80.ptx with -arch=sm_80")
    return [m[0].split() for m in matches]


def header_command(source: Path) -> list[str]:
    """The nvcc command line that builds `source`'s X.ptx (its first header line)."""
    return header_commands(source)[0]


def test_every_cuda_source_has_header_commands_and_committed_ptx():
    """Each .cu names its nvcc commands and has each output beside it; every source but the
    FP8 ones has an sm_80 build."""
    assert len(SOURCES) >= 20
    for source in SOURCES:
        commands = header_commands(source)
        for argv in commands:
            assert (source.parent / argv[-1]).is_file(), f"{source.name}: no {argv[-1]}"
        assert (len(commands) == 2) == (source.name not in FP8_SOURCES), (
            f"{source.name}: sm_80 build {'missing' if len(commands) == 1 else 'unexpected'}")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_committed_ptx_matches_fresh_nvcc_output(source, tmp_path):
    """Recompiling X.cu with each header command reproduces the committed PTX exactly."""
    for argv in header_commands(source):
        out = argv[-1]
        argv[-1] = str(tmp_path / out)
        subprocess.run(argv, cwd=source.parent, check=True, capture_output=True, timeout=300)
        assert (tmp_path / out).read_text() == (source.parent / out).read_text(), (
            f"{source.name}: committed {out} is stale; run workloads/kernels/regenerate_ptx.sh")
