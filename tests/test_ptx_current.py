"""The committed PTX in workloads/kernels is what nvcc makes from the committed CUDA source.

Each `X.cu` names its command on a `// ptx: nvcc ... X.cu -o X.ptx` header line (the one
`regenerate_ptx.sh` runs). When nvcc is on PATH, every source is recompiled into a temp
dir with that command and the output must equal the committed file byte for byte (nvcc's
PTX is deterministic and holds no paths). Without nvcc these tests skip.
"""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

KERNEL_DIR = Path(__file__).resolve().parents[1] / "workloads" / "kernels"
SOURCES = sorted([*KERNEL_DIR.glob("*.cu"), *KERNEL_DIR.glob("aten/*.cu")])
COMMAND = re.compile(r"^// ptx: (nvcc -ptx -O3 -arch=sm_90a? (\S+)\.cu -o (\S+)\.ptx)$", re.M)


def header_command(source: Path) -> list[str]:
    match = COMMAND.search(source.read_text())
    assert match, f"{source.name}: no '// ptx: nvcc -ptx -O3 -arch=sm_90 ...' header line"
    assert match.group(2) == match.group(3) == source.stem, f"{source.name}: names differ"
    return match.group(1).split()


def test_every_cuda_source_has_a_header_command_and_committed_ptx():
    """Each .cu names its nvcc command and has its .ptx beside it."""
    assert len(SOURCES) >= 20
    for source in SOURCES:
        header_command(source)
        assert source.with_suffix(".ptx").is_file(), f"{source.name}: no committed .ptx"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_committed_ptx_matches_fresh_nvcc_output(source, tmp_path):
    """Recompiling X.cu with its header command reproduces the committed X.ptx exactly."""
    argv = header_command(source)
    argv[-1] = str(tmp_path / argv[-1])
    subprocess.run(argv, cwd=source.parent, check=True, capture_output=True, timeout=300)
    fresh = (tmp_path / source.with_suffix(".ptx").name).read_text()
    assert fresh == source.with_suffix(".ptx").read_text(), (
        f"{source.name}: committed PTX is stale; run workloads/kernels/regenerate_ptx.sh")
