"""TMA tensor maps (CUtensorMap) for the Hopper kernels, encoded on the host through the CUDA driver.

The kernels read every operand as bytes: a map covers a [rows, k_bytes] matrix whose rows are `row_stride`
bytes apart, in boxes of 128 bytes of K x `box_rows` rows, 128-byte swizzled (what wgmma's K-major
descriptors expect). Out-of-range parts of a box arrive as zeros: ragged M, N and K need no masking in the
main loop.
"""

from __future__ import annotations

import ctypes

from .errors import LayoutError

_UINT8, _INTERLEAVE_NONE, _L2_PROMOTE_256B, _OOB_ZERO = 0, 0, 3, 0
_SWIZZLE = {0: 0, 32: 1, 64: 2, 128: 3}  # CU_TENSOR_MAP_SWIZZLE_NONE / 32B / 64B / 128B
BOX_BYTES = 128


class TensorMap(ctypes.Structure):
    _fields_ = [("opaque", ctypes.c_uint64 * 16)]


_encode = None


def _encoder():
    global _encode
    if _encode is None:
        from .runtime import _driver

        fn = _driver().cuTensorMapEncodeTiled
        fn.argtypes = [ctypes.POINTER(TensorMap), ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p,
                       ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64),
                       ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint32),
                       ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
        fn.restype = ctypes.c_int
        _encode = fn
    return _encode


_maps: dict = {}
_MAPS_KEPT = 4096  # a map is 128 bytes: room for every weight of a model (32 layers x 7 linears = 224) and its activations


def rows_map(ptr: int, rows: int, k_bytes: int, row_stride: int, box_rows: int, name: str = "operand",
             box_bytes: int = BOX_BYTES, swizzle: int = 128) -> bytes:
    """Tensor map (its 128 bytes) of a K-contiguous [rows, k_bytes] byte matrix at device address `ptr`, in
    boxes of box_bytes x box_rows, swizzled in spans of `swizzle` bytes (128 for wgmma tiles, 64 for 64-byte
    mma.sync tiles, 0: plain, for small side operands such as scales). A
    map is a pure function of these numbers, so maps are cached by them: encoding costs ~10 us of host time
    per call, and serving calls reuse the same weights and activation buffers."""
    key = (ptr, rows, k_bytes, row_stride, box_rows, box_bytes, swizzle)
    tmap = _maps.get(key)
    if tmap is None:
        if len(_maps) >= _MAPS_KEPT:
            _maps.clear()
        tmap = _maps[key] = bytes(_encode_rows(ptr, rows, k_bytes, row_stride, box_rows, name, box_bytes, swizzle))
    return tmap


def rows_maps(ptr: int, rows: int, k_bytes: int, row_stride: int, box_rows: int, name: str = "operand",
              **kw) -> tuple[bytes, bytes]:
    """`rows_map`, and the map a ragged last tile loads through: boxes of rows % box_rows rows (the same map when
    box_rows divides rows). A box partly past `rows` is zero-filled by the TMA unit, which measured up to 40%
    slower for a whole kernel (benchmarks/NOTES.md, W4A16 33 and sm90 22)."""
    full = rows_map(ptr, rows, k_bytes, row_stride, box_rows, name, **kw)
    tail = rows % box_rows
    return full, rows_map(ptr, rows, k_bytes, row_stride, tail, name, **kw) if tail else full


def _encode_rows(ptr: int, rows: int, k_bytes: int, row_stride: int, box_rows: int, name: str,
                 box_bytes: int, swizzle: int) -> TensorMap:
    if ptr % 16 or row_stride % 16:
        raise LayoutError(f"{name}: TMA needs a 16-byte aligned address and row stride (got {ptr % 16}, {row_stride})")
    tmap = TensorMap()
    dims = (ctypes.c_uint64 * 2)(k_bytes, rows)
    strides = (ctypes.c_uint64 * 1)(row_stride)
    box = (ctypes.c_uint32 * 2)(box_bytes, box_rows)
    steps = (ctypes.c_uint32 * 2)(1, 1)
    err = _encoder()(ctypes.byref(tmap), _UINT8, 2, ptr, dims, strides, box, steps, _INTERLEAVE_NONE,
                     _SWIZZLE[swizzle], _L2_PROMOTE_256B, _OOB_ZERO)
    if err:
        raise LayoutError(f"{name}: cuTensorMapEncodeTiled failed (CUDA error {err}) for {rows} rows x {k_bytes} "
                          f"bytes, row stride {row_stride}")
    return tmap


CLUSTER_DIMENSION = 4  # CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION


class _ClusterDimension(ctypes.Structure):  # a CUlaunchAttribute holding CLUSTER_DIMENSION's {x, y, z}
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("x", ctypes.c_uint), ("y", ctypes.c_uint),
                ("z", ctypes.c_uint), ("rest", ctypes.c_char * 52)]


class _LaunchConfig(ctypes.Structure):  # CUlaunchConfig
    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("shared_mem", ctypes.c_uint),
                ("stream", ctypes.c_void_p), ("attrs", ctypes.c_void_p), ("num_attrs", ctypes.c_uint)]


def max_active_clusters(handle, cluster: int, threads: int, smem_bytes: int, compiled: bool = True) -> int:
    """How many clusters of a loaded kernel (compiled with __cluster_dims__, or, with compiled=False, of a kernel
    compiled without them, launched in clusters of `cluster`) fit on the GPU at once: a persistent grid larger than
    this would run in two waves."""
    from .runtime import _driver

    fn = _driver().cuOccupancyMaxActiveClusters
    fn.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_void_p, ctypes.POINTER(_LaunchConfig)]
    fn.restype = ctypes.c_int
    attr = _ClusterDimension(CLUSTER_DIMENSION, b"", cluster, 1, 1)
    cfg = _LaunchConfig((cluster, 1, 1), (threads, 1, 1), smem_bytes, None,
                        None if compiled else ctypes.addressof(attr), 0 if compiled else 1)
    n = ctypes.c_int()
    err = fn(ctypes.byref(n), handle.func, ctypes.byref(cfg))
    if err:
        raise RuntimeError(f"cuOccupancyMaxActiveClusters failed with CUDA error {err}")
    return n.value
