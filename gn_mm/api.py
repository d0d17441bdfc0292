"""gn_mm.mm: the public matmul. Validates, picks a variant, a kernel family (sm90_mm with wgmma on sm_90,
sm80_mm with mma.sync elsewhere) and a config, and launches it."""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import torch

from . import int4_unpack, runtime, sm80_mm, sm90_mm
from .arch import Arch
from .config import SM80_CONFIGS, Sm80Config, choose_splits, choose_sm80
from .dtypes import ACC_DTYPES, DTYPE_NAMES, ELEMS, OUT_DTYPES, Elem
from .errors import ArchError, LayoutError, UnsupportedError, as_int
from .int4 import Int4Tensor
from .sm90_config import (SM90_CONFIGS, TALL_SPILLS, Sm90Config, choose_sm90, dependent_launch, half_cluster,
                          in_cluster, long_k, share_a, split_tiles, split_wider, swap_ab, whole_k)
from .variant_table import Variant, find, find_path

_ACC_NAMES = {v: k for k, v in ACC_DTYPES.items()}
_CONFIG_BY_NAME = {c.name: c for c in SM80_CONFIGS + SM90_CONFIGS}


def mm(a, b, *, acc_dtype: torch.dtype | None = None, out_dtype: torch.dtype | None = None,
       scale_a: torch.Tensor | None = None, scale_b: torch.Tensor | None = None,
       bias: torch.Tensor | None = None, config: Sm80Config | Sm90Config | str | None = None,
       splits: int | None = None, out: torch.Tensor | None = None) -> torch.Tensor:
    """C = A @ B on the tensor cores, with `torch.mm` semantics: a [M, K], b [K, N] -> [M, N].

    Inputs (a and b may differ only in fp8 flavour or integer signedness):
      bf16, fp16; fp32 (computed as tf32); float8_e4m3fn / float8_e5m2 (sm_89+); int8 / uint8;
      packed int4 / uint4 as gn_mm.Int4Tensor (see pack_int4).
    acc_dtype: float32 (default for floats), float16 (fp16 and fp8 inputs), int32 (integers).
    out_dtype: default = input dtype for 16-bit, bfloat16 for fp8, float32 for fp32, int32 for integers
      (bfloat16 for int8 when scales are given). The variant table lists every allowed output.
    scale_a / scale_b: fp8 and int8 only; fp32 scalars ([] or [1]), per row of A ([M]) or per column of
      B ([N]); out = (A @ B) * scale_a * scale_b + bias, computed in fp32.
    bias: [N] or [1, N], any float output.
    config: a gn_mm.Sm90Config (wgmma, sm_90 only) or gn_mm.Sm80Config (mma.sync), or its name, to override
      the heuristic; the config's family is the kernel that runs. "mma.sync" or "wgmma": that family with
      its heuristic config (mma.sync on sm_90 runs the sm_80 kernel, e.g. to compare the two).
    splits: K splits (split-K) to override the heuristic, which splits only when the output tiles cannot fill
      the GPU; never with f16 accumulation.
    out: optional [M, N] result tensor (rows contiguous), sharing no memory with the inputs; its dtype is the
      output dtype if out_dtype is None.
    No backward: tensors that require grad are refused while grad mode is on (use torch.no_grad()).

    Fast path: both operands K-contiguous (b passed as w.t() of an [N, K] weight). Other layouts are copied
    once to K-contiguous storage. K-contiguous rows must start on 16-byte boundaries (pointer and row stride),
    e.g. K a multiple of 8 for 16-bit data; anything else raises LayoutError.
    """
    # Fast path: a call whose metadata (dtypes, shapes, strides, devices, options, a given output's) was validated
    # before and needs no copies reuses that work; only what can change between such calls (pointer alignment, the
    # current device, grad mode, a given out's overlap with the inputs) is checked again, and a call that repeats an
    # earlier call's pointers replays its packed launches (_FastCall.run). Scales and bias qualify when they are already what the kernel reads (contiguous
    # fp32). It is what decode-sized calls spend their time on: 28 -> 11 us per call on the H100 machine's host,
    # where torch.matmul takes 14-15 (benchmarks/NOTES.md, sm90 34).
    key = fast = None
    try:
        if type(a) is torch.Tensor and type(b) is torch.Tensor and (out is None or type(out) is torch.Tensor):
            key = (a.dtype, b.dtype, a.shape, b.shape, a.stride(), b.stride(), a.device, b.device, acc_dtype,
                   out_dtype, config, splits)
            grad = a.requires_grad or b.requires_grad
            if out is not None:
                key += (out.dtype, out.shape, out.stride(), out.device)
                grad = grad or out.requires_grad
            if scale_a is not None or scale_b is not None or bias is not None:
                if _as_is(scale_a) and _as_is(scale_b) and _as_is(bias):  # (tensors: _grad reads them)
                    key += (_meta(scale_a), _meta(scale_b), _meta(bias))
                    grad = grad or _grad(scale_a, scale_b, bias)
                else:
                    key = None
            if grad and torch.is_grad_enabled():
                key = None  # the checks below refuse it (no backward)
        if key is not None:
            fast = _fast_calls.get(key)
    except (TypeError, RuntimeError):  # an unhashable option, a tensor without strides: the checks below name it
        key = fast = None
    if fast is not None:
        pa, pb = a.data_ptr(), b.data_ptr()
        if not (pa | pb) % 16 and fast.device_index == runtime.current_device() and \
                (out is None or fast.takes(out, pa, pb, scale_a, scale_b, bias)):
            c = torch.empty_strided(fast.shape, fast.strides, dtype=fast.dtype, device=a.device) if out is None \
                else out
            fast.run(a, b, c, pa, pb, scale_a, scale_b, bias)
            return c
    ea, eb = _elem(a, "a"), _elem(b, "b")
    _check_tensors(a=a, b=b, scale_a=scale_a, scale_b=scale_b, bias=bias, out=out)
    _check_2d(a, "a")
    _check_2d(b, "b")
    m, k = a.shape
    if b.shape[0] != k:
        raise LayoutError(f"b: shape {tuple(b.shape)} does not match a {tuple(a.shape)} (need b.shape[0] == {k})")
    n = b.shape[1]
    _check_overlap(out, a=a, b=b, scale_a=scale_a, scale_b=scale_b, bias=bias)

    acc = _acc_name(acc_dtype, ea)
    variant = find(ea.name, eb.name, acc)
    config = _named(config)  # the int4 decision below and the plan must see the same config
    _check_config(config)  # before the empty-problem returns: a bad option fails whatever the shape
    splits = _splits_arg(splits, variant)
    scaled = scale_a is not None or scale_b is not None
    out_name = _out_name(out_dtype, out, variant, ea, scaled)
    scale_a = _scale(scale_a, "scale_a", m, variant, out_name)
    scale_b = _scale(scale_b, "scale_b", n, variant, out_name)
    bias = _bias(bias, n, out_name)

    device = _check_devices(a, b, scale_a=scale_a, scale_b=scale_b, bias=bias, out=out)
    gpu = _gpu(device.index if device.index is not None else runtime.current_device())
    if gpu.arch.cc < variant.min_arch:
        raise ArchError(f"a, b: {variant.name} needs sm_{variant.min_arch} or newer; {gpu.name} is {gpu.arch.name}")

    c = _output(out, m, n, OUT_DTYPES[out_name], device)
    if m == 0 or n == 0:
        return c
    if k == 0:
        return _empty_k(c, bias)

    a_store, lda = _k_major(a, "a", ea, transposed=False)
    b_store, ldb = _k_major(b, "b", eb, transposed=True)
    k_bytes = k * ea.bits // 8
    if ea.bits == 4 and _wgmma_twin(variant, gpu, config, m, n) is not None:
        # Hopper has no int4 tensor-core instruction: unpack both operands to int8 and run the s8/u8 wgmma.
        a_store, lda = int4_unpack.unpack_rows(a_store, k, ea.name == "s4", gpu.arch)
        b_store, ldb = int4_unpack.unpack_rows(b_store, k, eb.name == "s4", gpu.arch)
        k_bytes = k
    # (which epilogue the first calls take: per-row scales of A, per-column scales of B or a bias)
    terms = (scale_a is not None and scale_a.numel() > 1, (scale_b is not None and scale_b.numel() > 1) or
             bias is not None)
    plan = _plan(variant, out_name, m, n, k_bytes, gpu, config, splits, terms)
    args = dict(m=m, n=n, k_bytes=k_bytes, lda_bytes=lda, ldb_bytes=ldb, scale_a=scale_a, scale_b=scale_b, bias=bias)
    if key is not None and a_store is a and b_store is b:  # validated and nothing copied: remember it
        if len(_fast_calls) >= 4096:
            _fast_calls.clear()
        _fast_calls[key] = _FastCall(plan, (m, n), (n, 1), c.dtype, gpu.index,
                                     dict(m=m, n=n, k_bytes=k_bytes, lda_bytes=lda, ldb_bytes=ldb), runtime.Replays(),
                                     (_extent(a), _extent(b), _extent(c)))
    if gpu.index == runtime.current_device():
        plan.launch(a_store, b_store, c, **args)
    else:  # kernels launch in the current device's context: switch to the tensors' GPU
        with torch.cuda.device(gpu.index):
            plan.launch(a_store, b_store, c, **args)
    return c


@dataclass(frozen=True)
class _FastCall:
    plan: object
    shape: tuple
    strides: tuple
    dtype: torch.dtype
    device_index: int
    args: dict
    replays: runtime.Replays  # the plan's launches by call pointers (a split-K workspace's included)
    extents: tuple  # bytes spanned by a, b and c (_extent): a given out's overlap check, in integers

    def takes(self, out, pa: int, pb: int, scale_a, scale_b, bias) -> bool:
        """Whether a given `out` (the validated call's metadata) can be written: aligned to its elements and sharing
        no byte with a (at pa), b (at pb), the scales or bias. Otherwise the slow path says what is wrong."""
        lo = out.data_ptr()
        ea, eb, ec = self.extents
        hi = lo + ec
        return not (lo % out.element_size() or pa < hi and lo < pa + ea or pb < hi and lo < pb + eb or
                    scale_a is not None and _meets(scale_a, lo, hi) or scale_b is not None and _meets(scale_b, lo, hi)
                    or bias is not None and _meets(bias, lo, hi))

    def run(self, a, b, c, pa: int, pb: int, scale_a, scale_b, bias) -> None:
        ws = self.plan.workspace(c)
        ptrs = (pa, pb, c.data_ptr()) if ws is None else (pa, pb, c.data_ptr(), ws.data_ptr())
        if scale_a is not None or scale_b is not None or bias is not None:
            ptrs += (runtime.data_ptr(scale_a), runtime.data_ptr(scale_b), runtime.data_ptr(bias))
        if not self.replays.fire(ptrs, self.device_index):
            self.replays.record(ptrs, self.device_index, lambda record: self.plan.launch(
                a, b, c, scale_a=scale_a, scale_b=scale_b, bias=bias, workspace=ws, record=record, **self.args))



_fast_calls: dict = {}  # call metadata -> _FastCall (see mm); cleared with the plans


def _as_is(x) -> bool:
    """None, or a tensor the kernel can read as given (contiguous fp32: validation would return a view of it)."""
    return x is None or (type(x) is torch.Tensor and x.dtype == torch.float32 and x.is_contiguous())


def _meta(x):
    return None if x is None else (x.shape, x.device)


def _grad(x, y, z) -> bool:
    """Whether one of the optional tensors (the fast path's scales and bias) requires grad: one call, not three."""
    return x is not None and x.requires_grad or y is not None and y.requires_grad or z is not None and z.requires_grad


def _meets(x, lo: int, hi: int) -> bool:
    """Whether contiguous x (a fast-path scale or bias) shares a byte with [lo, hi)."""
    p = x.data_ptr()
    return p < hi and lo < p + x.numel() * x.element_size()


def _extent(x) -> int:
    """Bytes from x's first element to the end of its last (torch strides are never negative); 0 if empty."""
    if x.numel() == 0:
        return 0
    return (1 + sum((size - 1) * stride for size, stride in zip(x.shape, x.stride()))) * x.element_size()


@dataclass(frozen=True, eq=False)  # one object per device (lru_cache below): identity hashing
class _Gpu:
    index: int
    name: str
    arch: Arch
    sm_count: int
    smem_limit: int
    dram_tbs: float  # peak DRAM bandwidth, TB/s, on sm_90 (its heuristic's narrowest tiles depend on it), else 0


@functools.lru_cache(maxsize=None)
def _gpu(index: int) -> _Gpu:
    props = torch.cuda.get_device_properties(index)
    arch = Arch.of_device(index)
    return _Gpu(index, props.name, arch, props.multi_processor_count,
                getattr(props, "shared_memory_per_block_optin", arch.smem_per_block()),
                runtime.dram_bandwidth(index) / 1e12 if arch.cc == 90 else 0.0)  # only sm_90's heuristic reads it


@functools.lru_cache(maxsize=4096)
def _plan(variant: Variant, out: str, m: int, n: int, k_bytes: int, gpu: _Gpu, config, splits,
          terms: tuple[bool, bool] = (False, False)):
    """Kernel family, config, split count and loaded kernels for one problem signature (cached: the hot
    path is a lookup)."""
    config = _named(config)
    wgmma = _wgmma_twin(variant, gpu, config, m, n)
    if config in FAMILIES:
        config = None  # the family is decided: its heuristic picks the config
    if wgmma is not None:
        plan = _sm90_plan(wgmma, variant, out, m, n, k_bytes, gpu, config, splits, terms)
        return replace(plan, dependent=dependent_launch(plan.config, m, n, k_bytes, plan.grid, gpu.sm_count,
                                                        gpu.dram_tbs))
    cfg = _config(config, m, n, gpu.arch, gpu.sm_count, gpu.smem_limit, variant)
    if splits is None:
        splits = choose_splits(m, n, k_bytes, cfg, gpu.sm_count, variant.acc)
    splits = _check_splits(splits, k_bytes, cfg, variant)
    return sm80_mm.Plan.make(variant, out, cfg, splits, gpu.arch, torch.device("cuda", gpu.index))


def _sm90_plan(wgmma: Variant, variant: Variant, out: str, m: int, n: int, k_bytes: int, gpu: _Gpu, config, splits,
               terms: tuple[bool, bool]):
    """_plan's wgmma branch: the heuristic's (or the given) config, splits and clusters."""
    cfg = config or choose_sm90(m, n, k_bytes, gpu.sm_count, gpu.dram_tbs, (variant.acc, out) not in TALL_SPILLS)
    cfg.check(gpu.smem_limit)
    device = torch.device("cuda", gpu.index)
    auto = config is None and splits is None
    if splits is None and (cfg.cluster_k > 1 or cfg.swap
                           or (config is None and whole_k(cfg, m, n, k_bytes, gpu.sm_count))):
        splits = 1
    elif splits is None:
        splits = choose_splits(m, n, k_bytes, cfg, gpu.sm_count, variant.acc)
        # The heuristic's split inside a cluster (one launch, sums added on chip), when every tile's cluster
        # is resident at once: a cluster that takes a second tile doubles the time.
        cand = in_cluster(cfg, splits, k_bytes, m) if config is None else None
        while cand is not None:
            # other widths and cluster sizes of a 64-row tile: the most CTAs whose clusters all fit at once
            cands = split_tiles(cand, m, n, k_bytes, gpu.sm_count)
            plan = _first_resident(wgmma, out, cands, m, n, gpu.sm_count, device, terms)
            if plan is not None:
                return plan
            cand = half_cluster(cand, k_bytes, m)  # not every cluster resident at once (NOTES sm90 49)
    if auto and variant.acc != "f16":
        # Mid M, long K: 128-row tiles split inside clusters that all fit at once.
        plan = _first_resident(wgmma, out, long_k(cfg, splits, m, n, k_bytes, gpu.sm_count, gpu.dram_tbs), m, n,
                               gpu.sm_count, device, terms)
        if plan is not None:
            return plan
        # Else a narrow lone tile with a long K: a wider one split 2 ways through the workspace.
        wider = split_wider(cfg, splits, m, n, k_bytes, gpu.sm_count)
        if wider is not None:
            cfg, splits = wider, 2
    splits = _check_splits(splits, k_bytes, cfg, variant)
    _check_cluster_k(cfg, splits, k_bytes, variant)
    if config is None and splits == 1:
        # Token counts that 128-row blocks pad: swapped tiles, the tokens along wgmma N (whose transposed stores
        # need rows of C in whole 16-byte units for TMA).
        swapped = swap_ab(cfg, m, n, gpu.sm_count) if n * OUT_DTYPES[out].itemsize % 16 == 0 else None
        if swapped is not None:
            return sm90_mm.Plan.make(wgmma, out, swapped, m, n, 1, gpu.sm_count, device, terms)
        # The tile in clusters sharing A, when all of them are resident at once.
        cand = share_a(cfg, m, n, gpu.sm_count)
        plan = _first_resident(wgmma, out, (cand,) if cand is not cfg else (), m, n, gpu.sm_count, device, terms)
        if plan is not None:
            return plan
    return sm90_mm.Plan.make(wgmma, out, cfg, m, n, splits, gpu.sm_count, device, terms)


runtime.on_clear.append(_plan.cache_clear)
runtime.on_clear.append(_fast_calls.clear)


def _first_resident(wgmma, out: str, cands, m: int, n: int, sm_count: int, device, terms=(False, False)):
    """The plan of the first clustered config in `cands` whose clusters are all resident at once, else None."""
    for cand in cands:
        plan = sm90_mm.Plan.make(wgmma, out, cand, m, n, 1, sm_count, device, terms)
        if _all_resident(plan, m, n):
            return plan
    return None


def _all_resident(plan, m: int, n: int) -> bool:
    """Whether a clustered plan's grid holds every CTA it needs at once (a cluster that takes a second unit in turn
    doubles the time of these shapes)."""
    return plan.grid == plan.config.ctas(m, n) * plan.config.cluster_k


def _named(config):
    """A config name -> its config object: the tables' names, and any Hopper name (e.g. a `_k4` split inside a
    cluster, or other stage counts). Families, objects, None and unknown names pass through (unknown names
    are refused by _config with the list of known ones)."""
    if not isinstance(config, str) or config in FAMILIES:
        return config
    if config in _CONFIG_BY_NAME:
        return _CONFIG_BY_NAME[config]
    if config.strip().startswith("sm90_"):
        try:
            return Sm90Config.parse(config)
        except ValueError as exc:
            raise UnsupportedError(str(exc)) from None  # parse's message names config already
    return config


FAMILIES = ("mma.sync", "wgmma")  # config values that pick a kernel family and leave the config to it


def _wgmma_twin(variant: Variant, gpu: _Gpu, config, m: int, n: int) -> Variant | None:
    """The wgmma variant to run instead of `variant`: on sm_90, unless an Sm80Config or "mma.sync" asks for
    mma.sync or the problem is int4 and too small for unpacking to pay."""
    if isinstance(config, Sm90Config) or config == "wgmma":
        if gpu.arch.cc != 90:
            name = config if config == "wgmma" else f"{config.name} is a wgmma config, which"
            raise ArchError(f"config: {name} needs sm_90; {gpu.name} is {gpu.arch.name}")
    elif config is not None or gpu.arch.cc != 90:
        return None
    twin = find_path(variant.a, variant.b, variant.acc, "wgmma")  # every mma.sync variant has a wgmma twin
    return None if twin.unpacked and not _unpack_int4_pays(m, n, config) else twin


def _elem(x, name: str) -> Elem:
    if isinstance(x, Int4Tensor):
        return ELEMS[x.dtype]
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor or gn_mm.Int4Tensor, got {type(x).__name__}")
    e = ELEMS.get(x.dtype)
    if e is None or e.bits == 4:
        allowed = ", ".join(str(d) for d, el in ELEMS.items() if el.bits != 4)
        raise UnsupportedError(f"{name}: dtype {x.dtype} is not supported; use one of {allowed}, "
                               "or gn_mm.pack_int4(...) for int4/uint4")
    return e


def _check_tensors(**tensors) -> None:
    """What every tensor argument needs before its strides are read: `out` a torch.Tensor, strided (dense)
    storage, and no autograd while grad mode is on (there is no backward: a gradient would be dropped silently).
    Other types pass: each argument's own check names them."""
    out = tensors["out"]
    if out is not None and not isinstance(out, torch.Tensor):
        raise TypeError(f"out: expected a torch.Tensor, got {type(out).__name__}")
    grad = torch.is_grad_enabled()
    for name, x in tensors.items():
        x = x.data if isinstance(x, Int4Tensor) else x
        if not isinstance(x, torch.Tensor):
            continue
        if x.layout != torch.strided:
            kind = "sparse" if "sparse" in str(x.layout) else str(x.layout)
            raise UnsupportedError(f"{name}: {kind} tensors are not supported; pass a dense tensor")
        if grad and x.requires_grad:
            raise UnsupportedError(f"{name}: requires grad; gn_mm.mm has no backward: call it under torch.no_grad() "
                                   "or torch.inference_mode()")


def _check_overlap(out, **inputs) -> None:
    """A given `out` must share no byte with an input: the kernel would overwrite data it still reads (a race, not
    an in-place update). Compares the byte ranges the tensors span."""
    if out is None:
        return
    for name, x in inputs.items():
        x = x.data if isinstance(x, Int4Tensor) else x
        if isinstance(x, torch.Tensor) and x.device == out.device and _shares_bytes(out, x):
            raise LayoutError(f"out: overlaps {name}; pass a separate tensor")


def _shares_bytes(x: torch.Tensor, y: torch.Tensor) -> bool:
    """Whether x and y share a byte. Exact for matrices of contiguous rows a common row stride apart (column slices
    of one buffer: an input beside its output); otherwise whether their spans meet (conservative)."""
    px, py = x.data_ptr(), y.data_ptr()
    if not (py < px + _extent(x) and px < py + _extent(y)):
        return False
    if x.dim() != 2 or y.dim() != 2 or x.numel() == 0 or y.numel() == 0 or \
            (x.size(1) > 1 and x.stride(1) != 1) or (y.size(1) > 1 and y.stride(1) != 1):
        return True
    lds = {t.stride(0) * t.element_size() for t in (x, y) if t.size(0) > 1}
    if len(lds) != 1:
        return True  # single rows (the spans are exact), or rows strided differently (conservative)
    ld = lds.pop()
    # Row i of x spans [px + i ld, + wx), row j of y [py + j ld, + wy): they meet iff -wy < d + (j - i) ld < wx.
    d, wx, wy = py - px, x.size(1) * x.element_size(), y.size(1) * y.element_size()
    lo, hi = (-wy - d) // ld + 1, -((d - wx) // ld) - 1
    return max(lo, 1 - x.size(0)) <= min(hi, y.size(0) - 1)


def _check_2d(x, name: str) -> None:
    if x.dim() != 2:
        raise LayoutError(f"{name}: expected a 2-D matrix, got shape {tuple(x.shape)}")


def _check_devices(a, b, **extras) -> torch.device:
    device = a.device
    if device.type != "cuda":
        raise ArchError(f"a: gn_mm.mm runs on CUDA tensors; a is on {device}")
    for name, x in (("b", b), *extras.items()):
        if x is not None and x.device != device:
            raise LayoutError(f"{name}: on {x.device}, but a is on {device}; move both to the same GPU")
    return device


def _acc_name(acc_dtype, ea: Elem) -> str:
    if acc_dtype is None:
        return "s32" if ea.is_int else "f32"
    if not isinstance(acc_dtype, torch.dtype):
        raise UnsupportedError(f"acc_dtype: expected a torch.dtype, got {type(acc_dtype).__name__} {acc_dtype!r}; "
                               "use torch.float32, torch.float16 or torch.int32")
    if acc_dtype not in _ACC_NAMES:
        raise UnsupportedError(f"acc_dtype: {acc_dtype} is not an accumulator; use torch.float32, "
                               "torch.float16 or torch.int32")
    return _ACC_NAMES[acc_dtype]


def _out_name(out_dtype, out, v: Variant, ea: Elem, scaled: bool) -> str:
    """The output type's name: out_dtype's, else a given out's dtype, else the default for the inputs."""
    arg = "out_dtype"
    if out_dtype is None and out is not None:
        out_dtype, arg = out.dtype, "out"
    if out_dtype is None:
        if v.acc == "f16":
            return "f16"
        if ea.is_int:
            return "bf16" if scaled and v.scalable else "s32"
        return {"bf16": "bf16", "f16": "f16", "tf32": "f32"}.get(ea.name, "bf16")
    allowed = ", ".join(str(OUT_DTYPES[o]) for o in v.outs)
    if not isinstance(out_dtype, torch.dtype):
        raise UnsupportedError(f"out_dtype: expected a torch.dtype, got {type(out_dtype).__name__} {out_dtype!r}; "
                               f"allowed: {allowed}")
    name = DTYPE_NAMES.get(out_dtype)
    if name not in v.outs:
        if arg == "out":
            raise UnsupportedError(f"out: dtype {out_dtype} is not an output of {v.name}; allowed: {allowed}")
        raise UnsupportedError(f"out_dtype: {v.name} cannot produce {out_dtype}; allowed: {allowed}")
    return name


def _scale(s, name: str, length: int, v: Variant, out: str) -> torch.Tensor | None:
    if s is None:
        return None
    if not v.scalable:
        raise UnsupportedError(f"{name}: scales apply to fp8 and int8 inputs only, not {v.a} x {v.b}")
    if out == "s32":
        raise UnsupportedError(f"{name}: scaled results are floats; pass out_dtype=torch.bfloat16, "
                               "torch.float16 or torch.float32")
    if not isinstance(s, torch.Tensor) or not s.dtype.is_floating_point:
        raise TypeError(f"{name}: expected a floating-point tensor")
    if s.numel() != 1 and tuple(s.shape) not in ((length,), (length, 1), (1, length)):
        raise LayoutError(f"{name}: expected a scalar ([] or [1]) or {length} values, got shape {tuple(s.shape)}")
    return s.reshape(-1).to(torch.float32).contiguous()


def _bias(bias, n: int, out: str) -> torch.Tensor | None:
    if bias is None:
        return None
    if out == "s32":
        raise UnsupportedError("bias: needs a float output; pass out_dtype (int32 results take no bias)")
    if not isinstance(bias, torch.Tensor) or not bias.dtype.is_floating_point:
        raise TypeError("bias: expected a floating-point tensor")
    if tuple(bias.shape) not in ((n,), (1, n)):  # [N, 1] would broadcast down the rows in torch, not along them
        raise LayoutError(f"bias: expected shape [N] or [1, N] with N = {n}, got {tuple(bias.shape)}")
    return bias.reshape(-1).to(torch.float32).contiguous()


def _output(out, m: int, n: int, dtype: torch.dtype, device) -> torch.Tensor:
    if out is None:
        return torch.empty((m, n), dtype=dtype, device=device)
    if out.dtype != dtype:  # out_dtype asks for another type (_check_tensors made sure out is a tensor)
        raise UnsupportedError(f"out: expected a {dtype} tensor, got {out.dtype}")
    if tuple(out.shape) != (m, n):
        raise LayoutError(f"out: expected shape ({m}, {n}), got {tuple(out.shape)}")
    if n > 1 and out.stride(1) != 1 or m > 1 and out.stride(0) < n:
        raise LayoutError(f"out: rows must be contiguous (stride(1) == 1), got strides {out.stride()}")
    if out.data_ptr() % out.element_size():
        raise LayoutError("out: data pointer is not aligned to its element size")
    return out


def _empty_k(c: torch.Tensor, bias) -> torch.Tensor:
    c.zero_()
    if bias is not None:
        c += bias.to(c.dtype)
    return c


def _k_major(x, name: str, e: Elem, transposed: bool) -> tuple[torch.Tensor, int]:
    """(storage whose rows are K-contiguous, row stride in bytes). `transposed`: x is [K, rows] (operand b).
    The fast path returns x itself: the kernel only needs its pointer and strides."""
    if isinstance(x, Int4Tensor):
        if x.transposed != transposed:
            want = "pack_int4(w).t() of an [N, K] weight" if transposed else "pack_int4(a) of an [M, K] matrix"
            raise LayoutError(f"{name}: int4 data is packed along K; pass {want}")
        x, transposed = x.data, False
    k_dim = 0 if transposed else 1
    rows_dim = 1 - k_dim
    # Rows closer together than K values (a broadcast's stride 0) overlap: no tensor map takes them, so they are
    # copied like any other layout that is not K-contiguous.
    if x.size(k_dim) > 1 and x.stride(k_dim) != 1 or x.size(rows_dim) > 1 and x.stride(rows_dim) < x.size(k_dim):
        x, k_dim = _copy_k_major(x.t() if transposed else x), 1
        rows_dim = 0
    item = x.element_size()
    ld = x.stride(rows_dim) * item if x.size(rows_dim) > 1 else 16
    if x.data_ptr() % 16:
        raise LayoutError(f"{name}: data pointer is not 16-byte aligned (offset {x.data_ptr() % 16}); "
                          "the kernels read 16-byte chunks; pass a tensor that starts on a 16-byte boundary")
    if ld % 16:
        raise LayoutError(f"{name}: K-contiguous rows are {ld} bytes apart, not a multiple of 16; "
                          f"pad K to a multiple of {128 // e.bits} values or use a row stride that is")
    return x, ld


def _unpack_int4_pays(m: int, n: int, config) -> bool:
    """Unpacking int4 for the s8 wgmma reads and writes both operands once more; it pays when the product has
    enough work per operand byte (measured on an H200: 9-17x the emulated s4 mma.sync at 4096^3..8192^3, a
    loss at M = 128). An explicit Sm90Config or "wgmma" always takes the wgmma path."""
    return isinstance(config, Sm90Config) or config == "wgmma" or min(m, n) >= 512


def _copy_k_major(rows: torch.Tensor) -> torch.Tensor:
    """Copy [R, K] into K-contiguous storage whose row stride is padded to 16 bytes."""
    r, k = rows.shape
    per16 = 16 // rows.element_size()
    buf = torch.empty((r, -(-k // per16) * per16), dtype=rows.dtype, device=rows.device)
    buf[:, :k].copy_(rows)
    return buf[:, :k]


def _splits_arg(splits, variant: Variant) -> int | None:
    """splits= on its own, as a Python int: None or a positive integer, and no split of f16 accumulation."""
    if splits is None:
        return None
    n = as_int(splits)
    if n is None or n < 1:
        raise UnsupportedError(f"splits: expected a positive int, got {splits!r}")
    if n > 1 and variant.acc == "f16":
        raise UnsupportedError("splits: f16 accumulation cannot be split (its rounding is the point)")
    return n


def _check_splits(splits: int, k_bytes: int, cfg, variant: Variant) -> int:
    """The kernel's split count for `splits` (given, or the heuristic's: never None here)."""
    splits = _splits_arg(splits, variant)
    k_tiles = -(-k_bytes // cfg.block_k_bytes)
    per = -(-k_tiles // splits)
    return -(-k_tiles // per)  # the kernel's split count: none of the splits is empty


def _check_cluster_k(cfg: Sm90Config, splits: int, k_bytes: int, variant: Variant) -> None:
    """A config that splits K inside a cluster: every CTA needs a K share, and the sums go straight to the
    epilogue (no workspace splits on top, no f16 accumulation). A swapped config takes no K splits either."""
    if cfg.swap and splits > 1:
        raise UnsupportedError(f"splits: {cfg.name} (C^T = B A^T) runs without K splits; pass splits=None or 1")
    ck = cfg.cluster_k
    if ck == 1:
        return
    if splits > 1:
        raise UnsupportedError(f"splits: {cfg.name} already splits K {ck} ways inside a cluster; pass splits=None")
    if variant.acc == "f16":
        raise UnsupportedError("config: f16 accumulation cannot be split (its rounding is the point)")
    k_tiles = -(-k_bytes // cfg.block_k_bytes)
    if k_tiles < ck:
        raise UnsupportedError(f"config: {cfg.name} splits K {ck} ways, but K has only {k_tiles} steps of "
                               f"{cfg.block_k_bytes} bytes: some CTAs would get none; use fewer (_k2, _k4) or none")


def _check_config(config) -> None:
    """config= after _named: None, a family name or a config object (_named resolved every known name)."""
    if isinstance(config, str) and config not in FAMILIES:
        known = ", ".join(FAMILIES + tuple(_CONFIG_BY_NAME))
        raise UnsupportedError(f"config: unknown name {config!r}; known: {known}")
    if not (config is None or isinstance(config, (str, Sm80Config, Sm90Config))):
        raise TypeError(f"config: expected a gn_mm.Sm80Config, gn_mm.Sm90Config or a config name, "
                        f"got {type(config).__name__}")


def _config(config, m, n, arch: Arch, sm_count: int, smem_limit: int, variant: Variant) -> Sm80Config:
    """The mma.sync config: the heuristic's, or the given one (which mm's _check_config has seen) against this GPU."""
    if config is None:
        return choose_sm80(m, n, arch, sm_count, smem_limit, arch.cc in variant.emulated_on, variant.acc)
    if not isinstance(config, Sm80Config):  # a family name or Sm90Config never gets here (_plan)
        raise TypeError("config: expected a gn_mm.Sm80Config or a config name")
    config.check(arch, smem_limit)
    return config
