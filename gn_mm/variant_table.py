"""The MMA variant table: every (TypeA, TypeB, TypeAcc) the kernels implement, as data.

Each row says which output types it may produce, the exact PTX instruction, the minimum architecture and
the architectures where the hardware compiler emulates the instruction (it is still correct there).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from .errors import UnsupportedError

# (A/B types, accumulator, outputs, mma shape, min arch, archs that emulate it)
# Integer MMA always saturates (.satfinite): no wrap-around on overflow.
_MMA_SYNC_FAMILIES = (
    (("bf16",), "f32", ("bf16", "f32"), "m16n8k16", 80, ()),
    (("f16",), "f32", ("f16", "bf16", "f32"), "m16n8k16", 80, ()),
    (("f16",), "f16", ("f16",), "m16n8k16", 80, ()),
    (("e4m3", "e5m2"), "f32", ("bf16", "f16", "f32"), "m16n8k32", 89, (90,)),
    (("e4m3", "e5m2"), "f16", ("f16",), "m16n8k32", 89, (90,)),
    (("s8", "u8"), "s32", ("s32", "bf16", "f16", "f32"), "m16n8k32", 80, ()),
    (("s4", "u4"), "s32", ("s32",), "m16n8k64", 80, (90, 120)),
    (("tf32",), "f32", ("f32",), "m16n8k8", 80, ()),
)

# Variants whose epilogue may apply fp32 scales (per tensor / row of A / column of B).
SCALED_TYPES = ("e4m3", "e5m2", "s8", "u8")


@dataclass(frozen=True, eq=False)  # one object per variant: identity hashing keeps plan lookups cheap
class Variant:
    a: str
    b: str
    acc: str
    outs: tuple[str, ...]
    shape: str
    min_arch: int
    emulated_on: tuple[int, ...]
    path: str = "mma.sync"

    @property
    def name(self) -> str:
        return f"{self.a}x{self.b}->{self.acc}"

    @property
    def instr(self) -> str:
        sat = ".satfinite" if self.acc == "s32" else ""
        return f"mma.sync.aligned.{self.shape}.row.col{sat}.{self.acc}.{self.a}.{self.b}.{self.acc}"

    @property
    def acc_bits(self) -> int:
        return 16 if self.acc == "f16" else 32

    @property
    def scalable(self) -> bool:
        return self.a in SCALED_TYPES


def _expand() -> tuple[Variant, ...]:
    rows = []
    for types, acc, outs, shape, min_arch, emulated in _MMA_SYNC_FAMILIES:
        for a, b in itertools.product(types, types):
            rows.append(Variant(a, b, acc, outs, shape, min_arch, emulated))
    return tuple(rows)


MMA_SYNC = _expand()
_BY_KEY = {(v.a, v.b, v.acc): v for v in MMA_SYNC}


def find(a: str, b: str, acc: str) -> Variant:
    """The variant for this input/accumulator triple, or an error listing what exists."""
    v = _BY_KEY.get((a, b, acc))
    if v is not None:
        return v
    same_inputs = [x.name for x in MMA_SYNC if (x.a, x.b) == (a, b)]
    if same_inputs:
        raise UnsupportedError(f"acc_dtype: {a} x {b} cannot accumulate in {acc}; supported: {', '.join(same_inputs)}")
    raise UnsupportedError(f"a, b: no tensor-core variant takes {a} x {b}; supported pairs: {supported_pairs()}")


def supported_pairs() -> str:
    return ", ".join(sorted({f"{v.a} x {v.b}" for v in MMA_SYNC}))


def variants(arch=None) -> list[dict]:
    """Every MMA variant as data: A and B types, accumulator, allowed outputs, the PTX instruction and its
    shape, the path, the minimum architecture, and whether `arch` emulates it.

    arch: "sm_90a", an Arch, or None for the current GPU (every variant, unfiltered, without one).
    Variants `arch` cannot run are left out.
    """
    from .arch import Arch

    if isinstance(arch, str):
        arch = Arch.parse(arch)
    elif arch is None:
        import torch

        arch = Arch.of_device() if torch.cuda.is_available() else None
    rows = []
    for v in MMA_SYNC:
        if arch is not None and arch.cc < v.min_arch:
            continue
        rows.append({"a": v.a, "b": v.b, "acc": v.acc, "outs": list(v.outs), "path": v.path, "instr": v.instr,
                     "shape": v.shape, "min_arch": f"sm_{v.min_arch}",
                     "emulated_on": [f"sm_{c}" for c in v.emulated_on],
                     "emulated": None if arch is None else arch.cc in v.emulated_on})
    return rows
