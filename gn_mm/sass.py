"""What the hardware compiler made of an MMA: the tensor-core opcodes in a cubin's SASS, and whether that is
the variant's native instruction or an emulation. Works offline with the NVIDIA pip wheels
(nvidia-cuda-cuobjdump / nvidia-cuda-nvdisasm) or a CUDA toolkit; says "unknown" when neither is present."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

# SASS opcode (with its shape) that executes each input type natively: mma.sync on sm_80+, wgmma on sm_90a.
NATIVE_OPCODE = {
    "mma.sync": {"bf16": "HMMA.16816", "f16": "HMMA.16816", "tf32": "HMMA.1688", "e4m3": "QMMA.16832",
                 "e5m2": "QMMA.16832", "s8": "IMMA.16832", "u8": "IMMA.16832", "s4": "IMMA.16864",
                 "u4": "IMMA.16864"},
    "wgmma": {"bf16": "HGMMA.64x256x16", "f16": "HGMMA.64x256x16", "tf32": "HGMMA.64x256x8", "e4m3": "QGMMA.64x256x32",
              "e5m2": "QGMMA.64x256x32", "s8": "IGMMA.64x256x32", "u8": "IGMMA.64x256x32",
              "s4": "IGMMA.64x256x32", "u4": "IGMMA.64x256x32"},  # int4 runs unpacked, as int8
}
_OPS = re.compile(r"\b((?:HMMA|IMMA|QMMA|HGMMA|IGMMA|QGMMA|F2FP|I2IP)[.\w]*)")


def disassembler(*tools: str) -> str | None:
    """cuobjdump or nvdisasm: on PATH, or from the NVIDIA pip wheels (cuda.pathfinder)."""
    for tool in tools or ("cuobjdump", "nvdisasm"):
        if shutil.which(tool):
            return shutil.which(tool)
        try:
            from cuda.pathfinder import find_nvidia_binary_utility

            found = find_nvidia_binary_utility(tool)
            if found:
                return found
        except Exception:
            pass
    return None


def disassemble(cubin: bytes) -> str | None:
    """The cubin's SASS text, or None without a disassembler."""
    tool = disassembler()
    if tool is None:
        return None
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "k.cubin"
        path.write_bytes(cubin)
        args = [tool, "-sass", str(path)] if Path(tool).name.startswith("cuobjdump") else [tool, str(path)]
        return subprocess.run(args, capture_output=True, text=True, check=True).stdout


def tensor_core_mix(sass_text: str) -> Counter:
    """Counts of tensor-core and unpacking opcodes (HMMA/IMMA/QMMA with their shape suffixes, F2FP ...)."""
    return Counter(_OPS.findall(sass_text))


def classify(a: str, mix: Counter, path: str = "mma.sync") -> str:
    """"native" when the variant's own opcode runs, "emulated" when only other tensor-core opcodes do."""
    want = NATIVE_OPCODE[path][a]
    if any(op.startswith(want) for op in mix):
        return "native"
    return "emulated" if mix else "no tensor-core instruction"
