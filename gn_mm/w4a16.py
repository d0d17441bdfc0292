"""gn_mm.w4a16_mm: fp16/bf16 activations x int4 GPTQ weights (group scales, optional zero points).

On Hopper (sm_90) the sm90_w4a16 kernel runs (wgmma, the weight as the register operand), on other CUDA GPUs
from sm_80 the sm80_w4a16 kernel (mma.sync); on ROCm builds of torch the hipRTC twin (gn_mm/rocm_w4a16.py).
"""

from __future__ import annotations

import contextlib
import functools
import weakref

import torch

from . import runtime, sm80_w4a16, sm90_w4a16, w4a16_decode
from .arch import Arch
from .errors import ArchError, LayoutError, UnsupportedError, as_int
from .w4a16_formats import W4A16Weight, check_gptq, g_idx_problem, prepare, zp_bias_problem

ACT_DTYPES = (torch.float16, torch.bfloat16)
# Problem lines that raise UnsupportedError (no kernel implements it) or ArchError (this device cannot run it: a
# caller's `except gn_mm.ArchError` CPU fallback catches it, as with gn_mm.mm); every other line is a LayoutError.
UNSUPPORTED_LINES = ("a: dtype", "g_idx: act-order")
ARCH_PHRASES = ("w4a16_mm runs on a CUDA or ROCm GPU", "w4a16_mm needs sm_80 or newer")


def can_implement(a: torch.Tensor | None, qweight, scales=None, qzeros=None, *, group_size: int | None = None,
                  zp_bias: int = 8, bias: torch.Tensor | None = None, g_idx=None) -> list[str]:
    """Why gn_mm would refuse `w4a16_mm(a, qweight, scales, qzeros, ...)`: one line per problem, naming the
    argument and what is allowed; an empty list when it can run. `a` may be None to check only the weight; an
    `a` on a CUDA device is also checked against that GPU (sm_80 or newer, a weight prepared for this vendor).
    `qweight` may be a prepared W4A16Weight (then scales, qzeros and group_size are not given). config= and
    splits= are checked by w4a16_mm itself."""
    problems = []
    if isinstance(qweight, W4A16Weight):
        if scales is not None or qzeros is not None or group_size is not None:
            problems.append("scales, qzeros, group_size: already inside the prepared W4A16Weight; pass None")
        # what was fixed when the weight was prepared: a call cannot change it, so refuse rather than ignore
        if as_int(zp_bias) not in (8, qweight.zp_bias):
            problems.append(f"zp_bias: fixed when the weight was prepared (it is {qweight.zp_bias}); pass the "
                            f"default")
        if (why := g_idx_problem(g_idx, qweight.k, qweight.group_size)) is not None:
            problems.append(why)
        k, n, dtype, device = qweight.k, qweight.n, qweight.dtype, qweight.device
    else:
        if group_size is None:
            return ["group_size: required with GPTQ tensors (32, 64, 128, K or -1 for per-channel)"]
        problems += check_gptq(qweight, scales, qzeros, group_size=group_size, g_idx=g_idx)
        if (why := zp_bias_problem(zp_bias)) is not None:
            problems.append(why)
        if problems:
            return problems
        k, n, dtype, device = qweight.shape[0], qweight.shape[1] * 8, scales.dtype, qweight.device
    if a is not None:
        if not isinstance(a, torch.Tensor):
            return problems + [f"a: expected a torch.Tensor, got {type(a).__name__}"]
        if a.dtype not in ACT_DTYPES:
            problems.append(f"a: dtype {a.dtype} is not supported; activations must be torch.float16 or "
                            f"torch.bfloat16")
        elif a.dtype != dtype:
            problems.append(f"a: dtype {a.dtype} differs from the scales' {dtype} (the output dtype); "
                            f"convert one of them")
        if a.dim() != 2 or a.shape[1] != k:
            problems.append(f"a: expected shape [M, K] with K = {k} (qweight's rows), got {tuple(a.shape)}")
        if a.device.type != "cuda":
            problems.append(f"a: on {a.device}; w4a16_mm runs on a CUDA or ROCm GPU")
        elif a.device != device:
            problems.append(f"a: on {a.device}, the weight is on {device}")
        else:
            problems += _device_problems(a.device, qweight)
    if bias is not None:
        if not isinstance(bias, torch.Tensor) or bias.dtype != dtype or tuple(bias.shape) != (n,):
            problems.append(f"bias: expected a [{n}] tensor of {dtype}")
        elif bias.device != device:
            problems.append(f"bias: on {bias.device}, the weight is on {device}")
    return problems


def _device_problems(device: torch.device, qweight) -> list[str]:
    """What this GPU (a CUDA device of this torch build) cannot run: an arch before sm_80, or a weight
    prepared for the other vendor's kernels."""
    problems = []
    if not torch.version.hip:
        arch = Arch.of_device(device)
        if arch.cc < sm80_w4a16.MIN_CC:
            problems.append(f"a: on {device}, an {arch.name} GPU; w4a16_mm needs sm_80 or newer (mma.sync "
                            f"m16n8k16 on fp16/bf16)")
    want = "gptq" if torch.version.hip else "nv_fragments"
    if isinstance(qweight, W4A16Weight) and qweight.layout != want:
        problems.append(_layout_line(qweight.layout))
    return problems


def _layout_line(layout: str) -> str:
    if torch.version.hip:
        return (f"qweight: prepared in the {layout!r} layout (for NVIDIA GPUs); on ROCm prepare it with "
                "gn_mm.prepare_w4a16 on this machine")
    return (f"qweight: prepared in the {layout!r} layout (for ROCm); on CUDA prepare it with gn_mm.prepare_w4a16 "
            "on this machine")


def _error_class(problems: list[str]) -> type:
    if any(p.startswith(UNSUPPORTED_LINES) for p in problems):
        return UnsupportedError
    if any(phrase in p for p in problems for phrase in ARCH_PHRASES):
        return ArchError
    return LayoutError


def w4a16_mm(a: torch.Tensor, qweight, scales: torch.Tensor | None = None, qzeros: torch.Tensor | None = None, *,
             group_size: int | None = None, zp_bias: int = 8, bias: torch.Tensor | None = None, g_idx=None,
             config: sm80_w4a16.W4A16Config | sm90_w4a16.Sm90W4A16Config | str | None = None,
             splits: int | None = None,
             out: torch.Tensor | None = None) -> torch.Tensor:
    """out[M, N] = a[M, K] @ dequant(W)[K, N] (+ bias), in a's dtype, with fp32 accumulation.

    a: float16 or bfloat16 activations, [M, K] (rows whose start is not 16-byte aligned are copied once).
    qweight: a W4A16Weight from `gn_mm.prepare_w4a16` (the fast path: repacked once at load time), or the GPTQ
      tensors themselves, repacked on every call (convenient, slower):
        qweight [K, N // 8] int32, 8 consecutive N-values per word at bits 0, 4, ..., 28;
        scales [K // G, N] in a's dtype; qzeros [K // G, N // 8] int32 packed like qweight, or None: then every
        zero point is zp_bias (8: symmetric uint4b8). w = (q - zero) * scale.
    group_size: G in {32, 64, 128} or K (per-channel, also written -1); with GPTQ tensors only.
    zp_bias: an int 0..15; with a W4A16Weight it was fixed by prepare_w4a16 (pass the default).
    g_idx: GPTQ's per-row group index; the trivial arange(K) // G every GPTQ layer carries is accepted, act-order
      (desc_act) checkpoints are refused with that explanation.
    bias: [N] in a's dtype. config / splits: override the heuristic (a config or its name: W4A16Config
      "w4a16_..." for the mma.sync kernel, any sm_80+; Sm90W4A16Config "w4a16wg_..." for the wgmma kernel,
      sm_90 only; splits: mma.sync K splits; wgmma 1 = whole tiles, s > 1 = stream-K over tiles x s CTAs).
    out: optional contiguous [M, N] result tensor of a's dtype (a preallocated serving buffer).
    Errors name the argument (see `w4a16_can_implement`): ArchError for activations that are not on a CUDA GPU
    of sm_80 or newer (as gn_mm.mm), UnsupportedError for dtypes and act-order, LayoutError otherwise."""
    key = None
    if type(qweight) is W4A16Weight and scales is None and qzeros is None and group_size is None \
            and g_idx is None and type(zp_bias) is int and zp_bias == 8 and type(a) is torch.Tensor \
            and (out is None or type(out) is torch.Tensor):
        # Serving loops repeat one signature: after one fully checked call, only what can change per call
        # (the activation's and a given output's address alignment, the current device) is looked at again.
        key = (id(qweight), a.shape, a.stride(), a.dtype, a.device, config, splits,
               None if bias is None else (bias.dtype, bias.shape, bias.device, bias.is_contiguous()),
               None if out is None else (out.dtype, out.shape, out.stride(), out.device))
        try:
            hit = _fast.get(key)
        except TypeError:  # an unhashable config or splits: the checked path below names it
            key = hit = None
        # A call that repeats an earlier call's pointers replays its packed launches (runtime.Replays). The entry
        # was recorded on a's device, so it is taken only while that is the current device (kernels launch in the
        # current device's context); otherwise the checked path switches device.
        if hit is not None and hit[0]() is qweight:
            pa = a.data_ptr()
            if pa % 16 == 0 and hit[2] == runtime.current_device() and (out is None or out.data_ptr() % 16 == 0):
                _, plan, device_index, replays = hit
                weight = qweight
                c = out if out is not None else \
                    torch.empty_strided((a.shape[0], weight.n), (weight.n, 1), dtype=weight.dtype, device=a.device)
                ws = plan.workspace(a)
                ptrs = (pa, c.data_ptr(), runtime.data_ptr(bias)) + \
                    (() if ws is None else (ws[0].data_ptr(), ws[1].data_ptr()))
                if not replays.fire(ptrs, device_index):
                    replays.record(ptrs, device_index, lambda record: plan.launch(a, weight, c, bias, ws, record))
                return c
    w, a_given, bias_given = qweight, a, bias
    problems = can_implement(a, qweight, scales, qzeros, group_size=group_size, zp_bias=zp_bias, bias=bias,
                             g_idx=g_idx)
    if problems:
        raise _error_class(problems)("w4a16_mm: " + "; ".join(problems))
    config = _config(config)
    if splits is not None:
        given, splits = splits, as_int(splits)
        if splits is None or splits < 1:
            raise LayoutError(f"splits: expected None or an int >= 1, got {given!r}")
    if not isinstance(w, W4A16Weight):
        w = prepare(qweight, scales, qzeros, group_size=group_size, zp_bias=zp_bias)
    if a.stride(-1) != 1 or (a.stride(0) * 2) % 16 or a.data_ptr() % 16:
        a = _aligned_rows(a)
    if bias is not None:
        bias = bias.contiguous()
    m = a.shape[0]
    c = _out(out, m, w.n, w.dtype, a.device)
    if m == 0:
        return c
    if torch.version.hip:
        from . import rocm_w4a16

        with _on_device(a.device):
            rocm_w4a16.launch(a, w, c, bias)
        return c
    if w.layout != "nv_fragments":
        raise LayoutError(_layout_line(w.layout))
    with _on_device(a.device):  # plan and launch for a's GPU, whichever device is current
        plan = _plan(w.dtype, sm80_w4a16.kernel_group_size(w), w.zeros is not None, m, w.n, w.packed.shape[0],
                     a.device.index, config, splits)
        if isinstance(plan, sm90_w4a16.Plan) and c.data_ptr() % 16:  # TMA stores need a 16-byte aligned start
            aligned = torch.empty_like(c)
            plan.launch(a, w, aligned, bias)
            return c.copy_(aligned)
        plan.launch(a, w, c, bias)
    if key is not None and a is a_given and bias is bias_given:  # no copies were needed: a reusable signature
        _remember(key, qweight, plan, a.device.index)
    return c


def _on_device(device: torch.device):
    """Kernels launch in the current device's context: switch to `device` where it is another CUDA device."""
    if device.type != "cuda" or device.index == runtime.current_device():
        return contextlib.nullcontext()
    return torch.cuda.device(device.index)


def _remember(key, weight: W4A16Weight, plan, device_index: int) -> None:
    """Keep a checked call's plan for the fast path. The weight is held weakly (an unloaded model's weights must
    free their memory): its entries go when it does, and a dead entry never matches a new object at its id."""
    if len(_fast) >= 1024:
        _fast.clear()

    def drop(ref, key=key):
        if _fast.get(key, (None,))[0] is ref:  # not a newer entry for another object at the same id
            _fast.pop(key, None)

    _fast[key] = (weakref.ref(weight, drop), plan, device_index, runtime.Replays())


# call signature -> (weakref to the weight, plan, device index, its recorded launches): the checked calls a serving
# loop repeats
_fast: dict = {}
runtime.on_clear.append(_fast.clear)


def _out(out, m: int, n: int, dtype, device) -> torch.Tensor:
    if out is None:
        return torch.empty((m, n), dtype=dtype, device=device)
    if not isinstance(out, torch.Tensor) or out.dtype != dtype or tuple(out.shape) != (m, n) \
            or out.device != device or not out.is_contiguous():
        raise LayoutError(f"out: expected a contiguous [{m}, {n}] tensor of {dtype} on {device}")
    return out


def _aligned_rows(a: torch.Tensor) -> torch.Tensor:
    """A copy of `a` whose rows start on 16-byte boundaries (K padded to a multiple of 8 with zeros)."""
    m, k = a.shape
    out = torch.zeros((m, -(-k // 8) * 8), dtype=a.dtype, device=a.device)
    out[:, :k] = a
    return out


CONFIG_TYPES = {"w4a16dec_": w4a16_decode.DecodeConfig, "w4a16wg_": sm90_w4a16.Sm90W4A16Config,
                "w4a16_": sm80_w4a16.W4A16Config}  # name prefix -> config class (the first that matches)


CONFIG_ACCEPTED = ("a config name (w4a16_..., w4a16wg_... or w4a16dec_...) or a W4A16Config / Sm90W4A16Config / "
                   "DecodeConfig object")


def _config(config):
    """`config=` as a config object (or None); LayoutError naming what is accepted."""
    if config is None or isinstance(config, tuple(CONFIG_TYPES.values())):
        return config
    if not isinstance(config, str):
        raise LayoutError(f"config: expected {CONFIG_ACCEPTED}, got {type(config).__name__}")
    name = config.strip()
    cls = next((cls for prefix, cls in CONFIG_TYPES.items() if name.startswith(prefix)), sm80_w4a16.W4A16Config)
    try:
        return cls.parse(name)
    except (ValueError, ArithmeticError) as e:  # (a zero count in a name divides by zero)
        why = str(e).removeprefix("config: ")
        raise LayoutError(f"config: {why}; expected {CONFIG_ACCEPTED}") from None


def family(arch: Arch, config=None):
    """The kernel module for this GPU (or for an explicit config): wgmma on sm_90, mma.sync elsewhere."""
    if isinstance(config, sm90_w4a16.Sm90W4A16Config):
        if arch.cc != 90:
            raise ArchError(f"config: {config.name} is a wgmma (sm_90) config; this GPU is {arch.name}")
        return sm90_w4a16
    if isinstance(config, sm80_w4a16.W4A16Config) or arch.cc != 90:
        return sm80_w4a16
    return sm90_w4a16


@functools.lru_cache(maxsize=4096)
def _plan(dtype, group_size, has_zeros, m, n, k_stages, device_index, config, splits):
    device = torch.device("cuda", device_index)
    arch = Arch.of_device(device)
    if arch.cc < sm80_w4a16.MIN_CC:
        raise ArchError(f"w4a16_mm: needs sm_80 or newer (mma.sync m16n8k16 on fp16/bf16); this GPU is {arch.name}")
    if splits is not None and not 1 <= splits <= k_stages:
        raise LayoutError(f"splits: {splits} is outside 1..{k_stages} (K / 64 rounded up)")
    # (K split into equal pieces of whole 64-value slices: the pieces that get any; the wgmma kernel's stream-K
    # shares are never empty)
    pieces = splits and sm80_w4a16.nonempty_splits(splits, k_stages)
    sm_count = torch.cuda.get_device_properties(device).multi_processor_count
    dram_tbs = runtime.dram_bandwidth(device.index) / 1e12 if arch.cc == 90 else 0.0
    if config is not None and (why := config.problem(group_size, k_stages)):
        raise LayoutError(f"config: {why}")
    # The wgmma kernel's own pick (sm_90, unpinned); where it splits K in clusters the decode kernel may cede to it.
    wgmma = sm90_w4a16.choose(m, n, sm_count, group_size, k_stages, sm90_w4a16.cluster_capacity(device.index),
                              dram_tbs) if config is None and arch.cc == 90 else None
    clustered = splits is None and w4a16_decode.cedes_to_clusters(wgmma, m, n, k_stages, dram_tbs)
    if (config is None and not clustered) or isinstance(config, w4a16_decode.DecodeConfig):  # the weight stream
        pick = w4a16_decode.choose(m, n, k_stages, sm_count, group_size, has_zeros,
                                   w4a16_decode.smem_limit(arch), pieces, config, wgmma=arch.cc == 90,
                                   dram_tbs=dram_tbs)
        if pick is not None:
            return w4a16_decode.Plan.make(dtype, group_size, has_zeros, m, n, k_stages, *pick, arch, device)
        if config is not None:
            raise LayoutError(f"config: {config.name} serves M <= {config.mrows} with the activations of a K "
                              f"split in shared memory; M = {m}, K = {64 * k_stages} does not fit")
    fam = family(arch, config)
    if config is None:
        config = wgmma if fam is sm90_w4a16 else fam.choose(m)
    smem = config.smem_bytes(group_size, has_zeros)
    if smem > arch.smem_per_block():
        raise LayoutError(f"config: {config.name} needs {smem} bytes of shared memory, {arch.name} allows "
                          f"{arch.smem_per_block()}")
    return fam.Plan.make(dtype, group_size, has_zeros, m, n, k_stages, config,
                         splits if fam is sm90_w4a16 else pieces, arch, device)


runtime.on_clear.append(_plan.cache_clear)
