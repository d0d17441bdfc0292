"""The MMA variant table: every (TypeA, TypeB, TypeAcc) tensor-core instruction, as data.

Each row says which output types it may produce, the exact PTX instruction, the architectures that have it
and those where the hardware compiler emulates it (it is still correct there). `MMA_SYNC` rows are what
`gn_mm.mm` runs (the sm80_mm kernel); `WGMMA` rows are Hopper's warpgroup instructions (sm_90a only),
measured by the instruction microbenchmark.
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

# wgmma (sm_90a): same type families, k covers 32 bytes; N = 8..256 (the microbenchmark uses 256). No s4/u4.
_WGMMA_FAMILIES = (
    (("bf16",), "f32", ("bf16", "f32"), "m64nNk16"),
    (("f16",), "f32", ("f16", "bf16", "f32"), "m64nNk16"),
    (("f16",), "f16", ("f16",), "m64nNk16"),
    (("e4m3", "e5m2"), "f32", ("bf16", "f16", "f32"), "m64nNk32"),
    (("e4m3", "e5m2"), "f16", ("f16",), "m64nNk32"),
    (("s8", "u8"), "s32", ("s32", "bf16", "f16", "f32"), "m64nNk32"),
    (("tf32",), "f32", ("f32",), "m64nNk8"),
    # No Hopper instruction takes int4: gn_mm unpacks it to int8 and runs the s8 / u8 wgmma (runs_as).
    (("s4", "u4"), "s32", ("s32",), "m64nNk32"),
)
_UNPACKED = {"s4": "s8", "u4": "u8"}

# wgmma immediates after scale-d: imm-scale-a/b, plus imm-trans-a/b for 16-bit types; integers take none.
_WGMMA_IMM = {"bf16": ", 1, 1, 0, 0", "f16": ", 1, 1, 0, 0", "e4m3": ", 1, 1", "e5m2": ", 1, 1", "tf32": ", 1, 1",
              "s8": "", "u8": ""}

# Variants whose epilogue may apply fp32 scales (per tensor / row of A / column of B).
SCALED_TYPES = ("e4m3", "e5m2", "s8", "u8")


@dataclass(frozen=True, eq=False)  # one object per variant: identity hashing keeps plan lookups cheap
class Variant:
    """One tensor-core instruction as a row of the variant table: input types `a` and `b`, accumulator `acc`, the
    output types it may produce (`outs`), its MMA `shape`, the oldest arch that has it (`min_arch`), the archs that
    emulate it, and its `path` (mma.sync or wgmma)."""
    a: str
    b: str
    acc: str
    outs: tuple[str, ...]
    shape: str
    min_arch: int
    emulated_on: tuple[int, ...]
    path: str = "mma.sync"
    only_arch: int | None = None  # wgmma exists on sm_90a alone (Blackwell has other instructions)

    @property
    def name(self) -> str:
        """The variant's name in the table, e.g. bf16xbf16->f32 (inputs and accumulator)."""
        return f"{self.a}x{self.b}->{self.acc}"

    @property
    def instr(self) -> str:
        """The PTX instruction (wgmma: with N left open, as `m64nNk16`)."""
        return self.ptx()

    def ptx(self, n: int | None = None) -> str:
        """The PTX instruction; for wgmma with N = n filled in."""
        sat = ".satfinite" if self.acc == "s32" else ""
        if self.path == "wgmma":
            shape = self.shape if n is None else self.shape.replace("N", str(n))
            a, b = _UNPACKED.get(self.a, self.a), _UNPACKED.get(self.b, self.b)
            return f"wgmma.mma_async.sync.aligned.{shape}{sat}.{self.acc}.{a}.{b}"
        return f"mma.sync.aligned.{self.shape}.row.col{sat}.{self.acc}.{self.a}.{self.b}.{self.acc}"

    def wgmma_operands(self, n: int) -> dict:
        """What codegen/wgmma.j2 needs for an m64n{n} wgmma: instruction, accumulator registers per thread,
        their asm constraint and the immediates."""
        assert self.path == "wgmma", self.name
        return {"instr": self.ptx(n), "regs": n // (4 if self.acc == "f16" else 2),
                "reg": "f" if self.acc == "f32" else "r", "imm": _WGMMA_IMM[_UNPACKED.get(self.a, self.a)]}

    @property
    def unpacked(self) -> bool:
        """int4 on the wgmma path: the operands are unpacked to int8 before the s8 / u8 instruction."""
        return self.path == "wgmma" and self.a in _UNPACKED

    @property
    def k(self) -> int:
        """The instruction's K: values per MMA along the reduction."""
        return int(self.shape.rsplit("k", 1)[1])

    @property
    def tile(self) -> tuple[int, int]:
        """(M, N) of one instruction (wgmma: N = 256, the largest)."""
        m, n = self.shape[1:].split("k")[0].split("n")
        return int(m), 256 if n == "N" else int(n)

    @property
    def arch_name(self) -> str:
        """The arch the variant needs, as sm_XY (sm_90a for the wgmma path)."""
        return "sm_90a" if self.path == "wgmma" else f"sm_{self.min_arch}"

    def arch_error(self, arch) -> str | None:
        """Why `arch` (an Arch) cannot run this variant, or None."""
        if self.only_arch is not None and arch.cc != self.only_arch:
            return f"{self.name} ({self.path}) exists on sm_{self.only_arch}a only; the target is {arch.name}"
        if arch.cc < self.min_arch:
            return f"{self.name} needs sm_{self.min_arch} or newer; the target is {arch.name}"
        return None

    def runs_on(self, cc: int) -> bool:
        """Whether a GPU of compute capability `cc` (e.g. 90) has the instruction."""
        return cc >= self.min_arch and (self.only_arch is None or cc == self.only_arch)

    @property
    def acc_bits(self) -> int:
        """Bits of an accumulator: 16 for f16 accumulation, else 32."""
        return 16 if self.acc == "f16" else 32

    @property
    def scalable(self) -> bool:
        """Whether the inputs take scale_a / scale_b (SCALED_TYPES: the 8-bit types)."""
        return self.a in SCALED_TYPES


def _expand() -> tuple[Variant, ...]:
    rows = []
    for types, acc, outs, shape, min_arch, emulated in _MMA_SYNC_FAMILIES:
        for a, b in itertools.product(types, types):
            rows.append(Variant(a, b, acc, outs, shape, min_arch, emulated))
    return tuple(rows)


def _expand_wgmma() -> tuple[Variant, ...]:
    rows = []
    for types, acc, outs, shape in _WGMMA_FAMILIES:
        for a, b in itertools.product(types, types):
            rows.append(Variant(a, b, acc, outs, shape, 90, (), "wgmma", 90))
    return tuple(rows)


MMA_SYNC = _expand()
WGMMA = _expand_wgmma()
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


def find_path(a: str, b: str, acc: str, path: str) -> Variant:
    """The variant of `path` ("mma.sync" or "wgmma") for this triple; KeyError when that path lacks it."""
    for v in MMA_SYNC + WGMMA:
        if (v.a, v.b, v.acc, v.path) == (a, b, acc, path):
            return v
    raise KeyError(f"no {path} variant {a}x{b}->{acc}")


def require_arch(variant: Variant, arch) -> None:
    """ArchError naming the minimum when `arch` cannot run `variant`."""
    from .errors import ArchError

    why = variant.arch_error(arch)
    if why:
        raise ArchError(why)


def variants(arch=None) -> list[dict]:
    """Every MMA variant as data: A and B types, accumulator, allowed outputs, the PTX instruction and its
    shape, the path (`mma.sync` for sm_80+, `wgmma` for sm_90a), the minimum architecture, whether `arch`
    emulates it, whether `gn_mm.mm` runs it (`used_by_mm`) and a note (int4 on wgmma runs as int8).

    arch: "sm_90a", an Arch, or None for the current GPU (every variant, unfiltered, without one).
    Variants `arch` cannot run are left out (wgmma exists on sm_90 only).
    """
    from .arch import Arch

    if isinstance(arch, str):
        arch = Arch.parse(arch)
    elif arch is None:
        import torch

        arch = Arch.of_device() if torch.cuda.is_available() else None
    rows = []
    for v in MMA_SYNC + WGMMA:
        if arch is not None and not v.runs_on(arch.cc):
            continue
        rows.append({"a": v.a, "b": v.b, "acc": v.acc, "outs": list(v.outs), "path": v.path, "instr": v.instr,
                     "shape": v.shape, "min_arch": v.arch_name,
                     "emulated_on": [f"sm_{c}" for c in v.emulated_on],
                     "emulated": None if arch is None else arch.cc in v.emulated_on,
                     "used_by_mm": True,
                     "note": "int4 unpacked to int8, then the s8/u8 wgmma" if v.unpacked else ""})
    return rows
