"""GPU tier: every variant and output against a float64 (floats) or exact (integers) reference.

Inputs are fresh random data, outputs are poisoned before launch, the K padding of every operand is filled
with garbage (a kernel that reads past K fails), and shapes are ragged in every dimension. On sm_90 every
test runs twice: on the default path (sm90_mm, wgmma) and with the mma.sync path forced (sm80_mm).
"""

import pytest
import torch

import gn_mm
from gn_mm import api, runtime, variant_table as variants
from gn_mm.dtypes import BY_NAME, OUT_DTYPES

pytestmark = pytest.mark.gpu


@pytest.fixture(params=["default", "mma.sync"], autouse=True)
def path(request, monkeypatch):
    """Which kernel family gn_mm.mm runs: its default, or mma.sync even where wgmma exists (sm_90)."""
    if request.param == "mma.sync":
        if torch.cuda.get_device_capability() != (9, 0):
            pytest.skip("mma.sync is already the default path on this GPU")
        monkeypatch.setattr(api, "_wgmma_twin", lambda *args: None)
    api._plan.cache_clear()
    api._fast_calls.clear()
    yield request.param
    api._plan.cache_clear()
    api._fast_calls.clear()

SHAPES = [(1, 1, 1), (1, 1000, 128), (7, 17, 1000), (17, 127, 7), (127, 7, 17), (1000, 1, 33), (129, 257, 300),
          (1000, 1000, 1000), (300, 520, 4096)]
TOL = {"bf16": 1e-2, "f16": 2e-3, "f32": 1e-5}  # relative Frobenius error vs float64, by output type
INPUT_TOL = {"tf32": 4e-3, "e4m3": 0.0, "e5m2": 0.0}  # extra error from the inputs themselves (tf32 truncation)
# Hopper's fp8 wgmma adds products into its f32 accumulator with about 14 bits of precision (the semantics of
# torch._scaled_mm(use_fast_accum=True)); measured relative error 1.2e-4 to 5.3e-4 at K <= 1000, growing slowly
# with K: e4m3 8.5e-4 at K = 8192 and 16384, 1.3e-3 at 32768 (H100, benchmarks/results/fp8_wgmma_error_vs_k_h100.json).
WGMMA_FP8_TOL = 2e-3


def extra_tol(a_type: str, path: str) -> float:
    hopper_fp8 = path == "default" and a_type in ("e4m3", "e5m2") and torch.cuda.get_device_capability() == (9, 0)
    return INPUT_TOL.get(a_type, 0.0) + (WGMMA_FP8_TOL if hopper_fp8 else 0.0)


def _rand(e, rows, k, device):
    """A K-contiguous [rows, k] operand of element type e, in storage padded past k with garbage."""
    if e.bits == 4:
        kp = -(-k // 32) * 32
        vals = torch.randint(-8, 8, (rows, kp), device=device) if e.name == "s4" else \
            torch.randint(0, 16, (rows, kp), device=device)
        packed = gn_mm.pack_int4(vals, signed=e.name == "s4")
        view = gn_mm.Int4Tensor(packed.data[:, : -(-k // 2)], packed.signed)
        exact = view.unpack().double()
        return view, exact
    per16 = 16 * 8 // e.bits
    kp = -(-k // per16) * per16 + per16  # at least one chunk of garbage
    if e.dtype.is_floating_point:
        full = torch.randn(rows, kp, device=device).to(e.dtype)
        full[:, k:] = float("nan")
    else:
        lo, hi = (-128, 128) if e.name == "s8" else (0, 256)
        full = torch.randint(lo, hi, (rows, kp), device=device, dtype=torch.int16).to(e.dtype)
        full[:, k:] = 77
    view = full[:, :k]
    return view, view.double()


def _epilogue_ref(a64, w64, m, n, device, scaled: bool):
    """(mm kwargs, float64 reference): with `scaled`, per-row / per-column scales and a bias (fp8 and int8 to float
    outputs); otherwise the plain product."""
    ref = a64 @ w64.t()
    if not scaled:
        return {}, ref
    sa, sb = torch.rand(m, device=device) + 0.5, torch.rand(n, device=device) * 0.01
    bias = torch.randn(n, device=device)
    return dict(scale_a=sa, scale_b=sb, bias=bias), ref * sa.double()[:, None] * sb.double()[None, :] + bias.double()


def _poison(m, n, dtype, device):
    c = torch.empty(m, n, dtype=dtype, device=device)
    c.fill_(float("nan") if dtype.is_floating_point else -(2**31) + 7)
    return c


def _check(c, ref, out, extra_tol=0.0):
    if out == "s32":
        assert torch.equal(c.long(), ref.round().long()), "integer result not exact"
        return
    # Where the exact result overflows the output type (f16 of large integer sums) inf is the right answer.
    # Entries within 0.1% of the largest finite value may round either way in fp32: not checked.
    expect = ref.to(OUT_DTYPES[out]).double()
    edge = (ref.abs() - torch.finfo(OUT_DTYPES[out]).max).abs() < 1e-3 * torch.finfo(OUT_DTYPES[out]).max
    finite = torch.isfinite(expect) & ~edge
    over = ~torch.isfinite(expect) & ~edge
    assert torch.equal(c.double()[over], expect[over]), "overflowed entries differ"
    assert torch.isfinite(c.double()[finite]).all(), "NaN/inf (unwritten or wrong) entries"
    c, ref = c.double()[finite], ref[finite]
    err = float((c - ref).norm() / ref.norm().clamp_min(1e-30))
    assert err <= TOL[out] + extra_tol, f"relative error {err:.3g}"


CASES = [(v, out) for v in variants.MMA_SYNC for out in v.outs if v.acc != "f16"]


@pytest.mark.parametrize("v,out", CASES, ids=[f"{v.name}->{o}" for v, o in CASES])
@pytest.mark.parametrize("shape", SHAPES, ids=[f"{m}x{n}x{k}" for m, n, k in SHAPES])
def test_variant_matches_float64(v, out, shape, path):
    m, n, k = shape
    if v.a in ("s4", "u4"):
        k = -(-k // 2) * 2
    dev = torch.device("cuda")
    ea, eb = BY_NAME[v.a], BY_NAME[v.b]
    a, a64 = _rand(ea, m, k, dev)
    w, w64 = _rand(eb, n, k, dev)
    c = _poison(m, n, OUT_DTYPES[out], dev)
    got = gn_mm.mm(a, w.t(), out=c)
    assert got.data_ptr() == c.data_ptr()
    _check(c, a64 @ w64.t(), out, extra_tol(v.a, path))


def _f16_acc_reference(a64, w64, chunk):
    """f16 accumulation as the tensor core does it: exact partial products per k-chunk, rounded to f16
    after each chunk is added."""
    acc = torch.zeros(a64.shape[0], w64.shape[0], dtype=torch.float16, device=a64.device)
    for k0 in range(0, a64.shape[1], chunk):
        part = a64[:, k0:k0 + chunk] @ w64[:, k0:k0 + chunk].t()
        acc = (acc.double() + part).half()
    return acc.double()


F16ACC = [v for v in variants.MMA_SYNC if v.acc == "f16"]


@pytest.mark.parametrize("v", F16ACC, ids=[v.name for v in F16ACC])
@pytest.mark.parametrize("shape", [(7, 17, 1000), (129, 257, 300), (64, 128, 4096)])
def test_f16_accumulation_matches_f16_reference(v, shape, path):
    m, n, k = shape
    dev = torch.device("cuda")
    a, a64 = _rand(BY_NAME[v.a], m, k, dev)
    w, w64 = _rand(BY_NAME[v.b], n, k, dev)
    if v.a == "f16":  # keep f16 sums well inside range
        a.mul_(0.25)
        w.mul_(0.25)
    a64, w64 = a.double(), w.double()
    c = _poison(m, n, torch.float16, dev)
    gn_mm.mm(a, w.t(), acc_dtype=torch.float16, out=c)
    ref16 = _f16_acc_reference(a64, w64, 16 if v.a == "f16" else 32)
    err16 = float((c.double() - ref16).norm() / ref16.norm())
    exact = a64 @ w64.t()
    err64 = float((c.double() - exact).norm() / exact.norm())
    # Hopper's fp8 wgmma rounds its f16 sums in its own order (measured 2.3e-3 to 2.5e-3 against this k32
    # reference at K = 4096); mma.sync and 16-bit inputs match it within 2e-3.
    hopper_fp8 = path == "default" and v.a != "f16" and torch.cuda.get_device_capability() == (9, 0)
    assert err16 < (5e-3 if hopper_fp8 else 2e-3), f"vs f16-accumulation reference: {err16:.3g}"
    assert err64 < 3e-2, f"vs float64: {err64:.3g}"


SCALED = [("e4m3", "e4m3"), ("e4m3", "e5m2"), ("s8", "s8"), ("u8", "s8")]


@pytest.mark.parametrize("pair", SCALED, ids=[f"{a}x{b}" for a, b in SCALED])
@pytest.mark.parametrize("out", ["bf16", "f16", "f32"])
@pytest.mark.parametrize("mode", ["tensor", "rowcol", "rowcol+bias", "bias"])
def test_scales_and_bias(pair, out, mode, path):
    m, n, k = 300, 520, 640  # whole tiles (the mma.sync kernel's staged epilogue) and ragged edge tiles
    dev = torch.device("cuda")
    a, a64 = _rand(BY_NAME[pair[0]], m, k, dev)
    w, w64 = _rand(BY_NAME[pair[1]], n, k, dev)
    kw, ref = {}, a64 @ w64.t()
    if mode == "tensor":
        sa, sb = torch.tensor(0.03, device=dev), torch.tensor([2.5], device=dev)
        kw.update(scale_a=sa, scale_b=sb)
        ref = ref * 0.03 * 2.5
    elif mode.startswith("rowcol"):
        sa, sb = torch.rand(m, device=dev) + 0.5, torch.rand(n, device=dev) * 0.01
        kw.update(scale_a=sa, scale_b=sb)
        ref = ref * sa.double()[:, None] * sb.double()[None, :]
    if mode.endswith("bias"):
        bias = torch.randn(n, device=dev) * ref.abs().mean()
        kw["bias"] = bias.to(OUT_DTYPES[out] if out != "f32" else torch.float32)
        ref = ref + kw["bias"].double()[None, :]
    c = _poison(m, n, OUT_DTYPES[out], dev)
    gn_mm.mm(a, w.t(), out=c, **kw)
    _check(c, ref, out, extra_tol(pair[0], path))


def test_bias_on_16bit_and_default_outputs():
    dev = torch.device("cuda")
    a = torch.randn(33, 64, device=dev, dtype=torch.bfloat16)
    w = torch.randn(40, 64, device=dev, dtype=torch.bfloat16)
    bias = torch.randn(40, device=dev, dtype=torch.bfloat16)
    c = gn_mm.mm(a, w.t(), bias=bias)
    assert c.dtype == torch.bfloat16
    _check(c, a.double() @ w.double().t() + bias.double(), "bf16")
    a8 = a.to(torch.float8_e4m3fn)
    assert gn_mm.mm(a8, w.to(torch.float8_e4m3fn).t()).dtype == torch.bfloat16
    i8 = torch.ones(4, 16, dtype=torch.int8, device=dev)
    assert gn_mm.mm(i8, i8.t()).dtype == torch.int32
    assert gn_mm.mm(i8, i8.t(), scale_a=torch.ones(1, device=dev)).dtype == torch.bfloat16


def test_other_layouts_are_correct():
    """B as a row-major [K, N] (N contiguous) and A transposed storage are copied, still exact."""
    dev = torch.device("cuda")
    a = torch.randn(100, 64, device=dev, dtype=torch.float16)
    b = torch.randn(64, 90, device=dev, dtype=torch.float16)  # torch.mm layout
    _check(gn_mm.mm(a, b), a.double() @ b.double(), "f16")
    at = torch.randn(64, 100, device=dev, dtype=torch.float16).t()
    _check(gn_mm.mm(at, b), at.double() @ b.double(), "f16")
    out = torch.empty(100, 128, device=dev, dtype=torch.float32)[:, 3:93]  # strided, odd-offset output
    gn_mm.mm(a, b, out_dtype=torch.float32, out=out)
    _check(out, a.double() @ b.double(), "f32")


def test_large_k_integer_saturates_not_wraps():
    dev = torch.device("cuda")
    k = 135_168  # 127 * 127 * k > 2^31
    a = torch.full((16, k), 127, dtype=torch.int8, device=dev)
    c = gn_mm.mm(a, a.t())
    assert int(c.min()) == 2**31 - 1


def test_errors_on_gpu():
    dev = torch.device("cuda")
    a = torch.randn(16, 64, device=dev, dtype=torch.bfloat16)
    with pytest.raises(gn_mm.LayoutError, match="b: on cpu, but a is on cuda"):
        gn_mm.mm(a, torch.randn(64, 8, dtype=torch.bfloat16))
    with pytest.raises(gn_mm.LayoutError, match="scale_a: on cpu"):
        gn_mm.mm(a.to(torch.float8_e4m3fn), a.to(torch.float8_e4m3fn).t(), scale_a=torch.ones(1))
    with pytest.raises(gn_mm.LayoutError, match="a: K-contiguous rows are 14 bytes apart"):
        x = torch.randn(16, 7, device=dev, dtype=torch.bfloat16)
        gn_mm.mm(x, x.t())
    with pytest.raises(gn_mm.LayoutError, match="a: data pointer is not 16-byte aligned"):
        big = torch.randn(16, 72, device=dev, dtype=torch.bfloat16)
        gn_mm.mm(big[:, 1:65], a.t())
    with pytest.raises(gn_mm.LayoutError, match=r"out: expected shape \(16, 16\)"):
        gn_mm.mm(a, a.t(), out=torch.empty(16, 17, device=dev, dtype=torch.bfloat16))



def test_fast_path_keeps_grad_and_overlap_checks():
    """Calls that warmed the fast path (same metadata) still refuse a weight that requires grad under grad mode
    and an out that overlaps a; the weight runs under torch.no_grad()."""
    dev = torch.device("cuda")
    a = torch.randn(16, 64, device=dev, dtype=torch.bfloat16)
    w = torch.randn(32, 64, device=dev, dtype=torch.bfloat16)
    out = torch.empty(16, 32, device=dev, dtype=torch.bfloat16)
    for _ in range(3):
        gn_mm.mm(a, w.t(), out=out)
    _check(out, a.double() @ w.double().t(), "bf16")
    wg = w.clone().requires_grad_()
    with pytest.raises(gn_mm.UnsupportedError, match="b: requires grad"):
        gn_mm.mm(a, wg.t(), out=out)
    out.fill_(float("nan"))
    with torch.no_grad():
        gn_mm.mm(a, wg.t(), out=out)
    _check(out, a.double() @ w.double().t(), "bf16")
    with pytest.raises(gn_mm.LayoutError, match="out: overlaps a"):
        gn_mm.mm(a, w.t(), out=a.view(-1)[:16 * 32].view(16, 32))  # same metadata as `out`


def test_broadcast_operands_and_row_bias():
    """Operands with stride-0 rows (expand) are copied, as torch.mm reads them; a [1, N] bias is taken."""
    dev = torch.device("cuda")
    a = torch.randn(1, 64, device=dev, dtype=torch.bfloat16).expand(16, 64)
    w = torch.randn(32, 64, device=dev, dtype=torch.bfloat16)
    _check(gn_mm.mm(a, w.t()), a.double() @ w.double().t(), "bf16")
    b = torch.randn(64, 1, device=dev, dtype=torch.bfloat16).expand(64, 32)  # [K, N], strides (1, 0)
    _check(gn_mm.mm(a, b), a.double() @ b.double(), "bf16")
    bias = torch.randn(1, 32, device=dev, dtype=torch.bfloat16)
    _check(gn_mm.mm(a, w.t(), bias=bias), a.double() @ w.double().t() + bias.double(), "bf16")


def test_empty_problems_validate_options():
    dev = torch.device("cuda")
    a = torch.randn(0, 64, device=dev, dtype=torch.bfloat16)
    w = torch.randn(32, 64, device=dev, dtype=torch.bfloat16)
    assert gn_mm.mm(a, w.t(), config="mma.sync").shape == (0, 32)
    with pytest.raises(gn_mm.UnsupportedError, match="config: unknown name 'bogus'"):
        gn_mm.mm(a, w.t(), config="bogus")

@pytest.mark.parametrize("types", [("bf16", "bf16", "f32", "bf16"), ("s8", "u8", "s32", "s32"),
                                   ("f16", "f16", "f16", "f16")], ids=lambda t: "{}x{}->{}->{}".format(*t))
def test_every_mma_sync_config_on_this_gpu(types, path):
    """Every mma.sync config this GPU can run (on sm_90: with the TMA-filled ring, 64- and 128-byte swizzled
    boxes), ragged in M, N and K, whole and split along K."""
    if path != "default":
        pytest.skip("the config is the argument here")
    from gn_mm import config as sm80_config
    from gn_mm.arch import Arch

    a_t, b_t, acc, out = types
    arch = Arch.of_device(torch.cuda.current_device())
    v = variants.find(a_t, b_t, acc)
    dev = torch.device("cuda")
    m, n, k = 300, 520, 1000
    a, a64 = _rand(BY_NAME[a_t], m, k, dev)
    w, w64 = _rand(BY_NAME[b_t], n, k, dev)
    if acc == "f16":
        a.mul_(0.25)
        a64 = a.double()
    for cfg in sm80_config.sm80_candidates(arch, emulated=arch.cc in v.emulated_on, acc=acc):
        for splits in (1, 3) if acc != "f16" else (1,):
            c = _poison(m, n, OUT_DTYPES[out], dev)
            gn_mm.mm(a, w.t(), out=c, config=cfg, splits=splits, acc_dtype=None if acc != "f16" else torch.float16)
            if acc == "f16":
                ref = (a.float() @ w.float().t()).double()  # f16 accumulation: compare loosely with an f32 sum
                assert ((c.double() - ref).norm() / ref.norm()).item() < 2e-2, cfg.name
            else:
                _check(c, a64 @ w64.t(), out)


def test_family_names_pick_the_kernel(path):
    """config="mma.sync" / "wgmma" choose the kernel family and leave the config to its heuristic."""
    if path != "default":
        pytest.skip("the family is the argument here")
    from gn_mm import sm80_mm, sm90_mm

    dev = torch.device("cuda")
    a = torch.randn(300, 520, device=dev, dtype=torch.bfloat16)
    w = torch.randn(129, 520, device=dev, dtype=torch.bfloat16)
    ref = a.double() @ w.double().t()
    hopper = torch.cuda.get_device_capability() == (9, 0)
    for family, plan_type in (("mma.sync", sm80_mm.Plan), ("wgmma", sm90_mm.Plan)):
        if family == "wgmma" and not hopper:
            with pytest.raises(gn_mm.ArchError, match="config: wgmma needs sm_90"):
                gn_mm.mm(a, w.t(), config=family)
            continue
        api._fast_calls.clear()
        c = gn_mm.mm(a, w.t(), config=family)
        assert ((c.double() - ref).norm() / ref.norm()).item() < TOL["bf16"]
        (fast,) = api._fast_calls.values()
        assert isinstance(fast.plan, plan_type)


def test_arch_too_old_names_minimum(monkeypatch):
    import dataclasses

    from gn_mm import api
    from gn_mm.arch import Arch

    real = api._gpu(torch.cuda.current_device())
    monkeypatch.setattr(api, "_gpu", lambda index: dataclasses.replace(real, arch=Arch(80)))
    api._fast_calls.clear()
    a = torch.randn(16, 64, device="cuda").to(torch.float8_e4m3fn)
    with pytest.raises(gn_mm.ArchError, match="needs sm_89 or newer"):
        gn_mm.mm(a, a.t())


def test_n_calls_one_compile(fresh_cache):
    dev = torch.device("cuda")
    a = torch.randn(64, 128, device=dev, dtype=torch.bfloat16)
    before = dict(runtime.stats)
    for _ in range(10):
        gn_mm.mm(a, a.t())
    assert runtime.stats["compiles"] - before.get("compiles", 0) == 1
    assert runtime.stats["loads"] - before.get("loads", 0) == 1
    runtime.clear_memory_cache()  # a new process would find it on disk
    gn_mm.mm(a, a.t())
    assert runtime.stats["compiles"] - before.get("compiles", 0) == 1
    assert runtime.stats["disk_hits"] - before.get("disk_hits", 0) == 1


def test_fast_path_rechecks_what_can_change():
    """A repeated call reuses its validation, but a misaligned pointer with the same metadata still fails."""
    dev = torch.device("cuda")
    flat = torch.randn(16 * 72 + 8, device=dev, dtype=torch.bfloat16)
    a = flat[:16 * 72].view(16, 72)[:, :64]
    w = torch.randn(32, 64, device=dev, dtype=torch.bfloat16)
    for _ in range(3):
        _check(gn_mm.mm(a, w.t()), a.double() @ w.double().t(), "bf16")
    assert len(api._fast_calls) >= 1
    shifted = flat[1:1 + 16 * 72].view(16, 72)[:, :64]  # same shape and strides, 2-byte offset
    with pytest.raises(gn_mm.LayoutError, match="16-byte aligned"):
        gn_mm.mm(shifted, w.t())
    # Scales take the fast path too, and new values are read on every call.
    a8, w8 = a.to(torch.float8_e4m3fn), w.to(torch.float8_e4m3fn)
    ref = a8.double() @ w8.double().t()
    for step in range(3):
        sa, sb = torch.rand(16, device=dev) + step, torch.rand(32, device=dev)
        c = gn_mm.mm(a8, w8.t(), scale_a=sa, scale_b=sb, out_dtype=torch.float32)
        _check(c, ref * sa.double()[:, None] * sb.double()[None, :], "f32", extra_tol("e4m3", "default"))


def test_replayed_launches_follow_the_data(monkeypatch):
    """A call that repeats a previous call's pointers replays its recorded launches (runtime.Launch): new values
    at those pointers, scales included, are read; other pointers get their own records; the record table's cap
    and a side stream change nothing; split-K plans record both launches, keyed by their workspace too."""
    dev = torch.device("cuda")
    monkeypatch.setattr(runtime.Replays, "KEPT", 3)
    a = torch.randn(16, 256, device=dev, dtype=torch.bfloat16)
    ws = [torch.randn(96, 256, device=dev, dtype=torch.bfloat16) for _ in range(5)]
    for step in range(3):
        a.copy_(torch.randn_like(a))
        for w in ws:  # 5 weights against a cap of 3 records: the table refills
            _check(gn_mm.mm(a, w.t()), a.double() @ w.double().t(), "bf16")
    (fast,) = api._fast_calls.values()
    assert fast.replays.table and all(len(v) == 1 for v in fast.replays.table.values())
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        c = gn_mm.mm(a, ws[-1].t())
    torch.cuda.current_stream().wait_stream(side)
    _check(c, a.double() @ ws[-1].double().t(), "bf16")
    a8, w8 = a.to(torch.float8_e4m3fn), ws[0].to(torch.float8_e4m3fn)
    sa, sb = torch.empty(16, device=dev), torch.empty(96, device=dev)
    for step in range(3):  # same scale pointers, new values
        sa.copy_(torch.rand(16, device=dev) + step)
        sb.copy_(torch.rand(96, device=dev))
        c = gn_mm.mm(a8, w8.t(), scale_a=sa, scale_b=sb, out_dtype=torch.float32)
        ref = (a8.double() @ w8.double().t()) * sa.double()[:, None] * sb.double()[None, :]
        _check(c, ref, "f32", extra_tol("e4m3", "default"))
    outs = [torch.empty(16, 96, device=dev, dtype=torch.bfloat16) for _ in range(2)]
    api._fast_calls.clear()
    for step in range(4):  # given outputs take the fast path too, keyed by their pointer
        a.copy_(torch.randn_like(a))
        out = outs[step % 2].fill_(float("nan"))
        assert gn_mm.mm(a, ws[1].t(), out=out) is out
        _check(out, a.double() @ ws[1].double().t(), "bf16")
    (fast,) = api._fast_calls.values()
    assert len(fast.replays.table) == 2
    api._fast_calls.clear()
    for _ in range(3):
        a.copy_(torch.randn_like(a))
        _check(gn_mm.mm(a, ws[0].t(), splits=2), a.double() @ ws[0].double().t(), "bf16")
    (fast,) = api._fast_calls.values()
    assert fast.plan.splits == 2 and fast.replays.table and all(len(v) == 2 for v in fast.replays.table.values())


def test_cuda_graph_capture():
    dev = torch.device("cuda")
    a = torch.randn(64, 128, device=dev, dtype=torch.bfloat16)
    w = torch.randn(96, 128, device=dev, dtype=torch.bfloat16)
    gn_mm.mm(a, w.t())  # compile and load outside the capture
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        c = gn_mm.mm(a, w.t())
    a.copy_(torch.randn_like(a))
    g.replay()
    torch.cuda.synchronize()
    _check(c, a.double() @ w.double().t(), "bf16")


SPLIT = [("bf16", "bf16", "f32", "bf16"), ("f16", "f16", "f32", "f32"), ("s8", "u8", "s32", "s32"),
         ("s8", "s8", "s32", "bf16"), ("e4m3", "e5m2", "f32", "f16"), ("tf32", "tf32", "f32", "f32"),
         ("s4", "u4", "s32", "s32")]


@pytest.mark.parametrize("combo", SPLIT, ids=["{}x{}->{}->{}".format(*c) for c in SPLIT])
@pytest.mark.parametrize("splits", [2, 3, 7])
@pytest.mark.parametrize("shape", [(7, 130, 2000), (129, 33, 4100), (16, 520, 1024)])
def test_split_k_matches_reference(combo, splits, shape, path):
    a_t, b_t, acc, out = combo
    m, n, k = shape
    dev = torch.device("cuda")
    a, a64 = _rand(BY_NAME[a_t], m, k, dev)
    w, w64 = _rand(BY_NAME[b_t], n, k, dev)
    kw, ref = _epilogue_ref(a64, w64, m, n, dev, a_t in ("s8", "e4m3") and out != "s32")
    c = _poison(m, n, OUT_DTYPES[out], dev)
    gn_mm.mm(a, w.t(), out=c, splits=splits, **kw)
    _check(c, ref, out, extra_tol(a_t, path))


def test_split_k_saturates_like_one_pass():
    dev = torch.device("cuda")
    a = torch.full((16, 135_168), 127, dtype=torch.int8, device=dev)
    for splits in (1, 2, 5):
        assert int(gn_mm.mm(a, a.t(), splits=splits).min()) == 2**31 - 1


def test_decode_shapes_use_split_k_and_stay_correct():
    from gn_mm import config

    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    m, n, k = 16, 4096, 4096
    cfg = config.choose_sm80(m, n, gn_mm.arch.Arch.of_device(dev), props.multi_processor_count)
    assert config.choose_splits(m, n, 2 * k, cfg, props.multi_processor_count, "f32") > 1
    a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
    w = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
    _check(gn_mm.mm(a, w.t()), a.double() @ w.double().t(), "bf16")


def test_f16_accumulation_refuses_split_k():
    a = torch.randn(16, 64, device="cuda", dtype=torch.float16)
    with pytest.raises(gn_mm.UnsupportedError, match="splits: f16 accumulation cannot be split"):
        gn_mm.mm(a, a.t(), acc_dtype=torch.float16, splits=2)
