"""The one path every kernel family takes: spec -> source -> cache key -> cubin -> loaded kernel -> launch.

* memory: a loaded kernel per (spec, device); a hit costs one dict lookup, no rendering or hashing.
* disk:   cubins under knobs.cache_dir(), keyed by SHA-256 of the rendered source (includes inlined),
          the NVRTC options with the arch, the NVRTC version and the gn_mm version.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import json
import struct
import threading
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import torch

from . import cache, codegen, compiler, knobs
from ._version import __version__
from .arch import Arch

# Counters tests and users can read: compiles, disk_hits, memory_hits, loads.
stats: Counter = Counter()
_loaded: dict = {}
_lock = threading.Lock()


@dataclass(frozen=True)
class KernelSpec:
    """Everything that determines one binary: family stem, kernel name, template parameters, arch."""

    stem: str
    name: str
    params: tuple  # sorted (key, value) pairs for the Jinja template
    arch: Arch
    smem_bytes: int = field(default=0, compare=False)

    @classmethod
    def make(cls, stem: str, name: str, params: dict, arch: Arch, smem_bytes: int = 0) -> "KernelSpec":
        return cls(stem, name, tuple(sorted(params.items())), arch, smem_bytes)

    def source(self) -> str:
        return codegen.render(self.stem, dict(self.params))


@dataclass(frozen=True)
class Built:
    cubin: bytes
    key: str
    meta: dict  # log, seconds, backend, nvrtc, arch
    from_disk: bool

    @property
    def ptxas(self) -> compiler.PtxasStats:
        """Registers, stack and spills: from the ptxas log, else read back from the cubin (the torch
        front-end, and some NVRTC set-ups that serve repeated compiles from a cache, return no log)."""
        stats = compiler.PtxasStats.parse(self.meta.get("log", ""), self.meta.get("name"))
        if stats.registers is None:
            stats = compiler.PtxasStats.from_cubin(self.cubin, self.meta.get("name", ""))
        return stats


def cache_key(source: str, arch: Arch, nvrtc: str) -> str:
    parts = {"source": source, "options": compiler.options(arch), "nvrtc": nvrtc, "gn_mm": __version__}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def _dump(source: str, spec: KernelSpec, key: str) -> Path | None:
    """The rendered source, written for the user to read; None where the dump directory cannot be written (a
    dump must never hide the build's own result or its CompileError)."""
    path = knobs.dump_dir() / f"{spec.name}_{spec.arch.name}_{key[:16]}.cu"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    except OSError as exc:
        _warn_once("dump", f"gn_mm: cannot write the rendered source to {path.parent} ({exc}); not dumped")
        return None
    return path


def _warn_once(what: str, message: str) -> None:
    if what not in _warned:
        _warned.add(what)
        warnings.warn(message, RuntimeWarning, stacklevel=3)


_warned: set = set()


def build(spec: KernelSpec, backend: str | None = None) -> Built:
    """The cubin for `spec`: from the disk cache, or compiled (and then stored)."""
    backend = backend or compiler.default_backend()
    nvrtc = compiler.nvrtc_version(backend)
    source = spec.source()
    key = cache_key(source, spec.arch, nvrtc)
    if knobs.DUMP.flag():
        _dump(source, spec, key)
    use_disk = not knobs.NO_DISK_CACHE.flag()
    if use_disk:
        hit = cache.load(key)
        if hit is not None:
            stats["disk_hits"] += 1
            return Built(hit[0], key, hit[1], True)
    result = compiler.compile_source(source, spec.name, spec.arch, backend, lambda: _dump(source, spec, key))
    stats["compiles"] += 1
    meta = {"log": result.log, "seconds": result.seconds, "backend": backend, "nvrtc": nvrtc,
            "arch": spec.arch.name, "name": spec.name, "options": list(compiler.options(spec.arch)),
            "cubin_bytes": len(result.cubin)}
    if use_disk:
        try:
            cache.store(key, result.cubin, meta)
        except OSError as exc:  # an unwritable cache directory: keep the cubin in memory, warn once
            _warn_once("store", f"gn_mm: cannot write the kernel cache under {knobs.cache_dir()} ({exc}); "
                       "kernels are compiled per process (set GN_MM_CACHE_DIR to a writable directory, or "
                       "GN_MM_NO_DISK_CACHE=1)")
    return Built(result.cubin, key, meta, False)


def kernel(spec: KernelSpec, device: torch.device, function: str | None = None):
    """A launchable kernel (torch's _CudaKernel) for `spec` on `device`: its main function, or another
    `function` of the same module. The main function gets its dynamic shared memory configured."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    key = (spec, index, function)
    handle = _loaded.get(key)
    if handle is not None:
        stats["memory_hits"] += 1
        return handle
    with _lock:
        handle = _loaded.get(key)
        if handle is None:
            module = _loaded.get((spec, index, "<module>"))
            if module is None:
                from torch.cuda._utils import _cuda_load_module

                built = build(spec)
                with torch.cuda.device(index):
                    module = _cuda_load_module(built.cubin)
                stats["loads"] += 1
                _loaded[(spec, index, "<module>")] = module
            with torch.cuda.device(index):
                handle = getattr(module, function or spec.name)
                if function is None and spec.smem_bytes:
                    handle.set_shared_memory_config(spec.smem_bytes)
            _loaded[key] = handle
    return handle


_libcuda = None
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # CUDA builds: a C call, no Stream object
# The current device without torch.cuda.current_device()'s lazy-init check (the caller already used CUDA).
current_device = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device
_param_blocks = threading.local()  # per thread: kinds -> _Params (a reusable parameter block)


def current_stream(device_index: int | None = None) -> int:
    """The current torch stream of a device (default: the current one) as a CUstream."""
    if _raw_stream is not None:
        return _raw_stream(current_device() if device_index is None else device_index)
    return torch.cuda.current_stream(device_index).cuda_stream


def data_ptr(x) -> int:
    """A tensor's address, 0 for None (optional operands in a replay key)."""
    return 0 if x is None else x.data_ptr()


def _driver():
    global _libcuda
    if _libcuda is None:
        from torch.cuda._utils import _get_gpu_runtime_library

        lib = _get_gpu_runtime_library()
        lib.cuLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
        lib.cuLaunchKernel.restype = ctypes.c_int
        if hasattr(lib, "cuLaunchKernelEx"):
            lib.cuLaunchKernelEx.argtypes = [ctypes.c_void_p] * 4
            lib.cuLaunchKernelEx.restype = ctypes.c_int
        _libcuda = lib
    return _libcuda


class _LaunchAttribute(ctypes.Structure):  # CUlaunchAttribute: an id, padding, a 64-byte value union
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_int), ("rest", ctypes.c_char * 60)]


class _LaunchConfig(ctypes.Structure):  # CUlaunchConfig
    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("shared_mem", ctypes.c_uint),
                ("stream", ctypes.c_void_p), ("attrs", ctypes.POINTER(_LaunchAttribute)), ("num_attrs", ctypes.c_uint)]


PROGRAMMATIC_STREAM_SERIALIZATION = 6  # CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION


TENSOR, INT, MAP = "tensor", "int", "map"  # argument kinds: pointer, 32-bit int, 128-byte TMA descriptor by value


def signature(args) -> tuple:
    """The argument kinds of a launch: callers whose kinds never change compute this once."""
    return tuple(TENSOR if isinstance(a, torch.Tensor) else INT if isinstance(a, int) else MAP for a in args)


class _Params:
    """A reusable kernel-parameter block for one signature: every value packed into one buffer by a single
    struct.pack_into (ctypes field assignments cost ~0.1 us each), and the array of pointers into it that
    cuLaunchKernel reads."""

    # An INT slot is 8 bytes wide: the kernel reads its low 4 (little-endian), so any int packs and values in
    # [2^31, 2^32) keep their bit pattern (e.g. W4A16's packed zero-point nibbles 0x88888888).
    _FORMAT = {TENSOR: "Q", INT: "q", MAP: "128s"}

    def __init__(self, kinds: tuple):
        self.packer = struct.Struct("=" + "".join(self._FORMAT[k] for k in kinds))
        self.buffer = ctypes.create_string_buffer(self.packer.size)
        base, offset, offsets = ctypes.addressof(self.buffer), 0, []
        for k in kinds:
            offsets.append(offset)
            offset += struct.calcsize(self._FORMAT[k])
        self.pointers = (ctypes.c_void_p * len(kinds))(*[base + o for o in offsets])
        self.tensors = tuple(i for i, k in enumerate(kinds) if k == TENSOR)

    def fill(self, args: list) -> "_Params":
        """Pack `args` (tensors become their data_ptr(); `args` is modified)."""
        for i in self.tensors:
            if type(args[i]) is not int:
                args[i] = args[i].data_ptr()
        self.packer.pack_into(self.buffer, 0, *args)
        return self


def launch(handle, grid: tuple, block: tuple, args: list, shared_mem: int = 0, kinds: tuple | None = None,
           dependent: bool = False, record: list | None = None) -> None:
    """Launch a loaded kernel on the current torch stream (CUDA-graph capturable). Pointer arguments are
    tensors or their data_ptr() ints, ints pass as 32-bit ints, TMA descriptors (bytes) by value (128 bytes).
    This is the hot path of every small matmul: the parameter block is built once per signature (per thread)
    and refilled in place. `kinds`: signature(args), when the caller already knows it (then `args` may be
    modified). `dependent`: programmatic dependent launch (the kernel may start while the previous kernel in
    the stream finishes; only for kernels that execute griddepcontrol.wait before touching any memory that
    kernel may write). `record`: append the launch, packed into a block of its own, as a `Launch` instead of
    sending it (see Launch)."""
    if kinds is None:
        kinds = signature(args)
        args = list(args)
    if record is not None:
        record.append(Launch(handle, grid, block, shared_mem, _Params(kinds).fill(args), dependent))
        return
    blocks = _param_blocks.__dict__
    params = blocks.get(kinds)
    if params is None:
        params = blocks[kinds] = _Params(kinds)
    params.fill(args)
    if dependent:
        config = blocks.get("config")
        if config is None:
            attr = _LaunchAttribute(PROGRAMMATIC_STREAM_SERIALIZATION, b"", 1)
            config = blocks["config"] = (_LaunchConfig(attrs=ctypes.pointer(attr), num_attrs=1), attr)
        cfg = config[0]
        cfg.grid[:] = grid
        cfg.block[:] = block
        cfg.shared_mem = shared_mem
        cfg.stream = current_stream()
        err = _driver().cuLaunchKernelEx(ctypes.byref(cfg), handle.func, params.pointers, None)
    else:
        err = _driver().cuLaunchKernel(handle.func, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                                       shared_mem, current_stream(), params.pointers, None)
    if err:
        raise RuntimeError(f"cuLaunchKernel{'Ex' if dependent else ''} failed with CUDA error {err}")


class Launch:
    """One kernel launch with its arguments packed, sent by fire() to the current stream: a call that repeats a
    previous one's pointers replays it instead of building the arguments again (gn_mm.mm's fast path: tensor
    maps, epilogue flags and packing cost ~12 us of host time per call on a slow host, the driver call ~4 us;
    benchmarks/NOTES.md, sm90 34). See Replays for what the key of a recorded launch must hold."""

    __slots__ = ("cfg", "cfg_ref", "attr", "func", "dims", "params", "dependent", "driver")

    def __init__(self, handle, grid: tuple, block: tuple, shared_mem: int, params: "_Params", dependent: bool):
        self.attr = _LaunchAttribute(PROGRAMMATIC_STREAM_SERIALIZATION, b"", 1)
        self.cfg = _LaunchConfig(grid, block, shared_mem, None, ctypes.pointer(self.attr), 1)
        self.cfg_ref, self.func, self.params, self.dependent = ctypes.byref(self.cfg), handle.func, params, dependent
        self.dims = (*grid, *block, shared_mem)
        self.driver = _driver()

    def fire(self, stream: int) -> None:
        """Send the launch to `stream` (a CUstream, e.g. current_stream()) of the device it was recorded on."""
        if self.dependent:
            self.cfg.stream = stream
            err = self.driver.cuLaunchKernelEx(self.cfg_ref, self.func, self.params.pointers, None)
        else:
            err = self.driver.cuLaunchKernel(self.func, *self.dims, stream, self.params.pointers, None)
        if err:
            raise RuntimeError(f"cuLaunchKernel{'Ex' if self.dependent else ''} failed with CUDA error {err}")


class Replays:
    """The recorded launches (Launch) of one call signature, by the current stream and the call's pointers: what
    the public functions' fast paths replay when a call repeats an earlier call's pointers (a serving loop's
    weights, and activation, output and workspace buffers that torch's allocator hands back). Every pointer a
    launch reads must be in the key, including per-call workspaces (allocated per call like the output, so
    stream-ordered) and per-stream ones (split_k.tickets). The stream in the key gives every record one stream:
    threads on different streams never share a Launch (whose config holds the stream it was last sent to)."""

    __slots__ = ("table",)
    KEPT = 256  # per signature: a model's layers of one shape share it (e.g. 32 weights); ~1 KB each

    def __init__(self):
        self.table = {}

    def fire(self, ptrs: tuple, device_index: int) -> bool:
        """Send the launches recorded for `ptrs` on the device's current stream to it; False when there are none."""
        stream = current_stream(device_index)
        launches = self.table.get((stream, ptrs))
        if launches is None:
            return False
        for launch in launches:
            launch.fire(stream)
        return True

    def record(self, ptrs: tuple, device_index: int, launch) -> None:
        """Record what `launch(record)` issues (it passes `record` on to runtime.launch) under `ptrs` and the
        current stream, then fire it."""
        launches = []
        launch(launches)
        if len(self.table) >= self.KEPT:
            self.table.clear()
        self.table[current_stream(device_index), ptrs] = tuple(launches)
        self.fire(ptrs, device_index)


def max_active_blocks(handle, threads: int, smem_bytes: int) -> int:
    """CTAs of a loaded kernel that fit on one SM at once (registers, shared memory, threads), per the driver."""
    fn = _driver().cuOccupancyMaxActiveBlocksPerMultiprocessor
    fn.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
    fn.restype = ctypes.c_int
    n = ctypes.c_int()
    err = fn(ctypes.byref(n), handle.func, threads, smem_bytes)
    if err:
        raise RuntimeError(f"cuOccupancyMaxActiveBlocksPerMultiprocessor failed with CUDA error {err}")
    return max(1, n.value)


@functools.lru_cache(maxsize=None)
def dram_bandwidth(device_index: int) -> float:
    """The device's peak DRAM bandwidth in bytes/s, from the driver: memory clock x bus width, double data rate
    (H100 SXM 3.35e12, H200 4.8e12)."""
    fn = _driver().cuDeviceGetAttribute
    fn.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_int]
    fn.restype = ctypes.c_int
    got = []
    for attr in (36, 37):  # CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE (kHz), _GLOBAL_MEMORY_BUS_WIDTH (bits)
        v = ctypes.c_int()
        err = fn(ctypes.byref(v), attr, device_index)
        if err:
            raise RuntimeError(f"cuDeviceGetAttribute({attr}) failed with CUDA error {err}")
        got.append(v.value)
    return 2 * got[0] * 1e3 * got[1] / 8


# Caches elsewhere that hold loaded kernels (the API's launch plans) register their clear() here.
on_clear: list = []


def clear_memory_cache() -> None:
    """Forget loaded kernels (the next call reloads from disk or recompiles)."""
    _loaded.clear()
    for clear in on_clear:
        clear()
