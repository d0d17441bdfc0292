"""NVRTC front-ends. Both compile the same source with the same options to the same cubin:

* "torch": torch's NVRTC library with the options and flags of torch.cuda._compile_kernel's compile half, used on a
  CUDA device;
* "bindings": cuda.bindings.nvrtc, which needs no GPU and no driver (offline compiles, CI).
"""

from __future__ import annotations

import ctypes
import functools
import os
import re
import subprocess
import tempfile
import time
from dataclasses import dataclass

import torch

from .arch import Arch
from .errors import ArchError, CompileError

# Beyond the architecture. ptxas -v puts registers/spills in the log; it does not change the binary.
BASE_OPTIONS = ("-std=c++17", "--ptxas-options=-v")


# What torch's NVRTC helper (torch.cuda._utils._get_gpu_rtc_compatible_flags) appends to every compile. The
# offline front-end passes the same, so both produce the same cubin under the same cache key. Kept as data:
# asking torch imports torch.utils.cpp_extension (~70 ms on every fresh process's first call).
# tests/test_compile_offline.py checks it still matches torch.
TORCH_NVRTC_FLAGS = ("-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
                     "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__")


def torch_flags() -> tuple[str, ...]:
    return TORCH_NVRTC_FLAGS


def options(arch: Arch) -> tuple[str, ...]:
    return (f"--gpu-architecture={arch.name}", *BASE_OPTIONS, *torch_flags())


@dataclass(frozen=True)
class CompileResult:
    cubin: bytes
    log: str
    seconds: float
    backend: str


@dataclass(frozen=True)
class PtxasStats:
    registers: int | None
    stack_bytes: int | None
    spill_stores: int | None
    spill_loads: int | None

    @classmethod
    def parse(cls, log: str, function: str | None = None) -> "PtxasStats":
        """Stats of `function` (default: the first entry function) from a `ptxas -v` log."""
        if function is not None:
            start = log.find(f"Compiling entry function '{function}'")
            end = log.find("Compiling entry function", start + 1)
            log = log[start:end if end > 0 else None] if start >= 0 else ""

        def grab(pattern: str) -> int | None:
            m = re.search(pattern, log)
            return int(m.group(1)) if m else None

        return cls(grab(r"Used (\d+) registers"), grab(r"(\d+) bytes stack frame"),
                   grab(r"(\d+) bytes spill stores"), grab(r"(\d+) bytes spill loads"))

    @classmethod
    def from_cubin(cls, cubin: bytes, function: str) -> "PtxasStats":
        """Registers and local memory read back from a cubin (cuobjdump -res-usage), for binaries whose
        compile log is unavailable. Local memory counts as spills: the kernels keep none on purpose."""
        from .sass import disassembler

        tool = disassembler("cuobjdump")
        if tool is None:
            return cls(None, None, None, None)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "k.cubin")
            with open(path, "wb") as f:
                f.write(cubin)
            text = subprocess.run([tool, "-res-usage", path], capture_output=True, text=True).stdout
        m = re.search(rf"Function {re.escape(function)}:\s*REG:(\d+) STACK:(\d+) SHARED:\d+ LOCAL:(\d+)", text)
        if not m:
            return cls(None, None, None, None)
        regs, stack, local = (int(x) for x in m.groups())
        return cls(regs, stack, local, local)

    @property
    def spills(self) -> bool:
        return bool(self.spill_stores or self.spill_loads)


def default_backend() -> str:
    return "torch" if torch.cuda.is_available() and torch.version.cuda else "bindings"


@functools.lru_cache(maxsize=None)
def nvrtc_version(backend: str) -> str:
    if backend == "torch":
        major, minor = ctypes.c_int(), ctypes.c_int()
        _torch_nvrtc().nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
        return f"{major.value}.{minor.value}"
    from cuda.bindings import nvrtc

    _, major, minor = nvrtc.nvrtcVersion()
    return f"{major}.{minor}"


def _torch_nvrtc():
    """torch's libnvrtc (the "torch" front-end), or ArchError where this torch build has none (a CPU build)."""
    from torch.cuda._utils import _get_nvrtc_library

    try:
        return _get_nvrtc_library()
    except (OSError, AttributeError) as exc:  # (a CPU build of torch has no CUDA version to find it by)
        raise ArchError(f"torch's NVRTC library did not load ({exc}); on a CPU build of torch compile with the "
                        "cuda.bindings front-end (pip install cuda-python nvidia-cuda-nvrtc; --backend bindings)") \
            from None


def _compile_torch(source: str, name: str, arch: Arch) -> tuple[bytes, str]:
    """NVRTC as torch.cuda._compile_kernel runs it (torch's libnvrtc, --gpu-architecture, the options, torch's flags),
    called here rather than through torch's _nvrtc_compile: that helper first imports torch.utils.cpp_extension (and
    setuptools) for CUDA include paths, which gn_mm's self-contained sources never read, ~0.5 s of a cold first call
    on the H100 machine (NOTES sm90 79), and it drops the log of a successful compile (ptxas -v)."""
    lib = _torch_nvrtc()

    def check(err: int, what: str) -> None:
        if err:  # (nvrtcGetErrorString returns the text: a prototype that says so)
            text = ctypes.CFUNCTYPE(ctypes.c_char_p, ctypes.c_int)(("nvrtcGetErrorString", lib))(err)
            raise RuntimeError(f"{what}: {(text or b'unknown NVRTC error').decode()}")

    prog = ctypes.c_void_p()
    check(lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), f"{name}.cu".encode(), 0, None, None), "create")
    try:
        opts = [o.encode() for o in options(arch)]
        err = lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
        size = ctypes.c_size_t()
        check(lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size)), "log size")
        log = ctypes.create_string_buffer(size.value)
        check(lib.nvrtcGetProgramLog(prog, log), "log")
        log_text = log.value.decode(errors="replace").rstrip()
        if err:
            raise RuntimeError(f"Kernel compilation failed:\n{log_text}")
        check(lib.nvrtcGetCUBINSize(prog, ctypes.byref(size)), "cubin size")
        cubin = ctypes.create_string_buffer(size.value)
        check(lib.nvrtcGetCUBIN(prog, cubin), "cubin")
        return cubin.raw, log_text
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


def _compile_bindings(source: str, name: str, arch: Arch) -> tuple[bytes, str]:
    from cuda.bindings import nvrtc

    def check(result, what):
        err = result[0]
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise RuntimeError(f"{what}: {nvrtc.nvrtcGetErrorString(err)[1].decode()}")
        return result[1:]

    (prog,) = check(nvrtc.nvrtcCreateProgram(source.encode(), f"{name}.cu".encode(), 0, [], []), "create")
    try:
        opts = [o.encode() for o in options(arch)]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        (size,) = check(nvrtc.nvrtcGetProgramLogSize(prog), "log size")
        log = b" " * size
        check(nvrtc.nvrtcGetProgramLog(prog, log), "log")
        log_text = log.rstrip(b"\0 ").decode(errors="replace")
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise RuntimeError(f"Kernel compilation failed:\n{log_text}")
        (size,) = check(nvrtc.nvrtcGetCUBINSize(prog), "cubin size")
        cubin = b" " * size
        check(nvrtc.nvrtcGetCUBIN(prog, cubin), "cubin")
        return cubin, log_text
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


_BACKENDS = {"torch": _compile_torch, "bindings": _compile_bindings}


def compile_source(source: str, name: str, arch: Arch, backend: str, dumped_to) -> CompileResult:
    """Compile one rendered source to a cubin. `dumped_to()` writes the source and returns its path."""
    start = time.perf_counter()
    try:
        cubin, log = _BACKENDS[backend](source, name, arch)
    except RuntimeError as exc:
        path = dumped_to()  # (None where the dump directory cannot be written)
        raise CompileError(f"NVRTC failed to compile {name} for {arch.name}", str(exc),
                           None if path is None else str(path)) from None
    return CompileResult(cubin, log, time.perf_counter() - start, backend)
