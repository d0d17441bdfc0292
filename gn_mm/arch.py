"""GPU architectures as compile targets: parse "sm_90a" / "90" / "9.0", read the current device's."""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

from .errors import ArchError

# Opt-in shared memory per block, for offline heuristics when no device can be asked.
_SMEM_PER_BLOCK = {80: 163 * 1024, 86: 99 * 1024, 87: 163 * 1024, 89: 99 * 1024, 90: 227 * 1024,
                   100: 227 * 1024, 103: 227 * 1024, 120: 99 * 1024, 121: 99 * 1024}


@dataclass(frozen=True)
class Arch:
    cc: int           # compute capability as an integer: 80, 89, 90, 120 ...
    suffix: str = ""  # "a": arch-specific features (wgmma, setmaxnreg on sm_90a)

    @classmethod
    def parse(cls, text: str) -> "Arch":
        m = re.fullmatch(r"(?:sm_?|compute_?)?(\d+)(?:\.(\d))?([af]?)", text.strip().lower())
        if not m:
            raise ValueError(f"arch: cannot parse {text!r}; expected e.g. sm_80, sm_90a, 89, 9.0")
        cc = int(m.group(1)) * 10 + int(m.group(2)) if m.group(2) else int(m.group(1))
        return cls(cc, m.group(3))

    @classmethod
    def of_device(cls, device: torch.device | int | None = None) -> "Arch":
        if not torch.cuda.is_available():
            raise ArchError("gn_mm kernels need a CUDA GPU; torch.cuda.is_available() is False")
        major, minor = torch.cuda.get_device_capability(device)
        return cls(major * 10 + minor)

    @property
    def name(self) -> str:
        return f"sm_{self.cc}{self.suffix}"

    @property
    def nvrtc_cc(self) -> str:
        """What torch's NVRTC helpers take as compute_capability ("90a")."""
        return f"{self.cc}{self.suffix}"

    def smem_per_block(self) -> int:
        return _SMEM_PER_BLOCK.get(self.cc, 99 * 1024)

    def __str__(self) -> str:
        return self.name
