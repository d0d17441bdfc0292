"""gn_mm: JIT-compiled tensor-core matmul kernels for every MMA variant.

    import gn_mm
    c = gn_mm.mm(a, w.t())                        # bf16/fp16/fp32(tf32)/fp8/int8 ... on the tensor cores
    c = gn_mm.mm(a8, w8.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)   # W8A8 / FP8 serving
    c = gn_mm.mm(gn_mm.pack_int4(a4), gn_mm.pack_int4(w4).t())                   # int4 x int4 -> int32
"""

from ._version import __version__
from .api import mm
from .config import SM80_CONFIGS, Sm80Config
from .sm90_config import SM90_CONFIGS, Sm90Config
from .errors import ArchError, CompileError, GnMmError, LayoutError, UnsupportedError
from .int4 import Int4Tensor, pack_int4, unpack_int4
from .variant_table import MMA_SYNC, Variant, variants

__all__ = [
    "__version__", "mm", "Sm80Config", "SM80_CONFIGS", "Sm90Config", "SM90_CONFIGS", "Int4Tensor", "pack_int4", "unpack_int4",
    "Variant", "MMA_SYNC", "variants", "GnMmError", "UnsupportedError", "LayoutError", "ArchError", "CompileError",
]
