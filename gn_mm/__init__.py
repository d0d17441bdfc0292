"""gn_mm: JIT-compiled tensor-core matmul kernels for every MMA variant.

    import gn_mm
    c = gn_mm.mm(a, w.t())                        # bf16/fp16/fp32(tf32)/fp8/int8 ... on the tensor cores
    c = gn_mm.mm(a8, w8.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)   # W8A8 / FP8 serving
    c = gn_mm.mm(gn_mm.pack_int4(a4), gn_mm.pack_int4(w4).t())                   # int4 x int4 -> int32
    w = gn_mm.prepare_w4a16(qweight, scales, qzeros, group_size=128)              # GPTQ int4, once
    y = gn_mm.w4a16_mm(x, w)                                                      # W4A16, fp16/bf16 x
"""

from ._version import __version__
from .api import mm
from .config import SM80_CONFIGS, Sm80Config
from .sm90_config import SM90_CONFIGS, Sm90Config
from .errors import ArchError, CompileError, GnMmError, LayoutError, UnsupportedError
from .int4 import Int4Tensor, pack_int4, unpack_int4
from .variant_table import MMA_SYNC, Variant, variants
from .sm80_w4a16 import W4A16Config
from .w4a16 import can_implement as w4a16_can_implement, w4a16_mm
from .w4a16_formats import W4A16Weight, prepare as prepare_w4a16
from .w4a16_formats import from_awq as w4a16_from_awq, from_gptq as w4a16_from_gptq

__all__ = [
    "__version__", "mm", "Sm80Config", "SM80_CONFIGS", "Sm90Config", "SM90_CONFIGS", "Int4Tensor", "pack_int4", "unpack_int4",
    "Variant", "MMA_SYNC", "variants", "GnMmError", "UnsupportedError", "LayoutError", "ArchError", "CompileError",
    "w4a16_mm", "prepare_w4a16", "W4A16Weight", "W4A16Config", "w4a16_can_implement", "w4a16_from_gptq",
    "w4a16_from_awq",
]
