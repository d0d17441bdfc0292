"""The ROCm twin of the W4A16 kernel (cuda_src/rocm_w4a16.cu), compiled at run time by
torch.cuda._compile_kernel, which routes to hipRTC on ROCm builds of torch.

Without an AMD GPU the same source compiles offline through hipRTC (`compile_offline`, e.g. Debian's HIP 5.2
packages: gfx90a and gfx940). What is verified where: see the README's "ROCm" section.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

import torch

from . import codegen
from .errors import CompileError, LayoutError
from .w4a16_formats import W4A16Weight

STEM = "rocm_w4a16"
WAVES = 4  # waves per block along N (the kernel's WAVES)
# What torch's _nvrtc_compile adds on ROCm (cpp_extension.COMMON_HIPCC_FLAGS + the CUDA ones it keeps): the
# offline compile passes the same so it checks the source ROCm torch would build.
TORCH_HIPRTC_FLAGS = ("-DCUDA_HAS_FP16=1", "-D__HIP_NO_HALF_OPERATORS__=1", "-D__HIP_NO_HALF_CONVERSIONS__=1",
                      "-DHIP_ENABLE_WARP_SYNC_BUILTINS=1", "-D__CUDA_NO_HALF_OPERATORS__",
                      "-D__CUDA_NO_HALF_CONVERSIONS__", "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
                      "-D__CUDA_NO_HALF2_OPERATORS__")


def source(dtype: torch.dtype, has_zeros: bool) -> str:
    params = {"variant_name": f"w4a16 {str(dtype)[6:]}{' zeros' if has_zeros else ''}",
              "act_bf16": int(dtype == torch.bfloat16), "has_zeros": int(has_zeros)}
    return codegen.render(STEM, params)


@functools.lru_cache(maxsize=None)
def _kernel(dtype: torch.dtype, has_zeros: bool, device_index: int):
    """Compiled (hipRTC, for the current device's gcnArchName) once per process and device."""
    return torch.cuda._compile_kernel(source(dtype, has_zeros), STEM)


def launch(a: torch.Tensor, w: W4A16Weight, c: torch.Tensor, bias: torch.Tensor | None) -> None:
    """a [M, K] (unit column stride), w prepared in the "gptq" layout, c [M, N] contiguous."""
    if w.layout != "gptq":
        raise LayoutError(f"qweight: the ROCm kernel reads the GPTQ layout; this weight was prepared as "
                          f"{w.layout!r} (prepare it on the ROCm machine)")
    m, k = a.shape
    kernel = _kernel(w.dtype, w.zeros is not None, a.device.index or 0)
    grid = (-(-w.n // (16 * WAVES)), -(-m // 16), 1)
    kernel(grid, (64 * WAVES, 1, 1),
           [a, w.packed, w.scales, w.zeros if w.zeros is not None else w.packed, bias if bias is not None else c, c,
            m, w.n, k, a.stride(0), w.group_size, w.zp_bias, int(bias is not None)])


@functools.lru_cache(maxsize=None)
def _hiprtc():
    for name in ("hiprtc", "amdhip64"):  # ROCm >= 5.3 ships libhiprtc; HIP 5.2 keeps hiprtc in libamdhip64
        path = ctypes.util.find_library(name)
        for candidate in ([path] if path else []) + [f"lib{name}.so", f"lib{name}.so.5"]:
            try:
                lib = ctypes.CDLL(candidate)
                lib.hiprtcCreateProgram  # noqa: B018 (has the symbol)
                return lib
            except (OSError, AttributeError):
                continue
    return None


def hiprtc_available() -> bool:
    return _hiprtc() is not None


def compile_offline(src: str, arch: str = "gfx90a") -> bytes:
    """The code object hipRTC builds from `src` for `arch`, with torch's ROCm flags; no GPU needed."""
    lib = _hiprtc()
    if lib is None:
        raise RuntimeError("hipRTC not found (apt-get install hipcc libhiprtc-builtins5, or a ROCm install)")
    prog = ctypes.c_void_p()
    if lib.hiprtcCreateProgram(ctypes.byref(prog), src.encode(), f"{STEM}.cu".encode(), 0, None, None):
        raise RuntimeError("hiprtcCreateProgram failed")
    try:
        opts = [f"--offload-arch={arch}".encode(), b"-O3", *(f.encode() for f in TORCH_HIPRTC_FLAGS)]
        err = lib.hiprtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
        size = ctypes.c_size_t()
        lib.hiprtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value + 1)
        lib.hiprtcGetProgramLog(prog, log)
        if err:
            raise CompileError(f"hipRTC failed to compile {STEM} for {arch}", log.value.decode(errors="replace"), None)
        lib.hiprtcGetCodeSize(prog, ctypes.byref(size))
        code = ctypes.create_string_buffer(size.value)
        lib.hiprtcGetCode(prog, code)
        return code.raw
    finally:
        lib.hiprtcDestroyProgram(ctypes.byref(prog))
