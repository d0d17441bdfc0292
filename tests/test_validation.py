"""Bad input raises a clear error naming the argument; these checks need no GPU."""

import re
import warnings

import pytest
import torch

import gn_mm
from gn_mm import api
from gn_mm.arch import Arch
from gn_mm.config import Sm80Config
from gn_mm.dtypes import BY_NAME
from gn_mm.errors import ArchError, LayoutError, UnsupportedError


def t(shape, dtype=torch.bfloat16):
    return torch.zeros(shape, dtype=dtype)


def test_unsupported_dtype_lists_supported():
    with pytest.raises(UnsupportedError, match=r"a: dtype torch.float64 is not supported.*bfloat16"):
        gn_mm.mm(t((4, 8), torch.float64), t((8, 4)))


def test_mismatched_pair_lists_pairs():
    with pytest.raises(UnsupportedError, match=r"a, b: no tensor-core variant takes bf16 x f16; supported pairs"):
        gn_mm.mm(t((4, 8)), t((8, 4), torch.float16))


def test_bad_accumulator():
    with pytest.raises(UnsupportedError, match=r"acc_dtype: bf16 x bf16 cannot accumulate in f16"):
        gn_mm.mm(t((4, 8)), t((8, 4)), acc_dtype=torch.float16)
    with pytest.raises(UnsupportedError, match="acc_dtype: torch.float64 is not an accumulator"):
        gn_mm.mm(t((4, 8)), t((8, 4)), acc_dtype=torch.float64)


def test_bad_output_lists_allowed():
    with pytest.raises(UnsupportedError, match=r"out_dtype: bf16xbf16->f32 cannot produce torch.float16; "
                                               r"allowed: torch.bfloat16, torch.float32"):
        gn_mm.mm(t((4, 8)), t((8, 4)), out_dtype=torch.float16)
    with pytest.raises(UnsupportedError, match="out_dtype"):
        gn_mm.mm(t((4, 8), torch.int8), t((8, 4), torch.int8), out_dtype=torch.int8)


def test_shape_errors():
    with pytest.raises(LayoutError, match=r"b: shape \(9, 4\) does not match a \(4, 8\)"):
        gn_mm.mm(t((4, 8)), t((9, 4)))
    with pytest.raises(LayoutError, match="a: expected a 2-D matrix"):
        gn_mm.mm(t((2, 4, 8)), t((8, 4)))


def test_not_a_tensor():
    with pytest.raises(TypeError, match="b: expected a torch.Tensor"):
        gn_mm.mm(t((4, 8)), [[1.0]])


def test_scales_only_for_fp8_and_int8():
    with pytest.raises(UnsupportedError, match="scale_a: scales apply to fp8 and int8"):
        gn_mm.mm(t((4, 8)), t((8, 4)), scale_a=torch.ones(1))
    i8 = torch.int8
    with pytest.raises(UnsupportedError, match="scale_b: scaled results are floats"):
        gn_mm.mm(t((4, 16), i8), t((16, 4), i8), scale_b=torch.ones(4), out_dtype=torch.int32)
    with pytest.raises(LayoutError, match=r"scale_a: expected a scalar \(\[\] or \[1\]\) or 4 values"):
        gn_mm.mm(t((4, 16), i8), t((16, 4), i8), scale_a=torch.ones(3))
    with pytest.raises(LayoutError, match=r"bias: expected shape \[N\] or \[1, N\] with N = 4, got \(5,\)"):
        gn_mm.mm(t((4, 16), i8), t((16, 4), i8), bias=torch.ones(5), out_dtype=torch.float32)
    with pytest.raises(UnsupportedError, match="bias: needs a float output"):
        gn_mm.mm(t((4, 16), i8), t((16, 4), i8), bias=torch.ones(4))


def test_cpu_tensors_are_refused():
    with pytest.raises(ArchError, match="a: gn_mm.mm runs on CUDA tensors; a is on cpu"):
        gn_mm.mm(t((4, 8)), t((8, 4)))


def test_int4_must_be_packed_along_k():
    a4 = gn_mm.pack_int4(torch.zeros(4, 32, dtype=torch.int8))
    with pytest.raises(LayoutError, match="b: int4 data is packed along K"):
        api._k_major(a4, "b", BY_NAME["s4"], transposed=True)


def test_alignment_errors_name_the_argument():
    x = torch.zeros(4, 7, dtype=torch.bfloat16)  # 14-byte rows
    with pytest.raises(LayoutError, match="a: K-contiguous rows are 14 bytes apart, not a multiple of 16; "
                                          "pad K to a multiple of 8"):
        api._k_major(x, "a", BY_NAME["bf16"], transposed=False)
    base = torch.zeros(4, 24, dtype=torch.bfloat16)
    with pytest.raises(LayoutError, match="a: data pointer is not 16-byte aligned"):
        api._k_major(base[:, 1:17], "a", BY_NAME["bf16"], transposed=False)


def test_non_k_major_operands_are_copied_to_aligned_storage():
    b = torch.randn(7, 5).to(torch.bfloat16)  # [K, N] row-major: N contiguous, not K
    rows, ld = api._k_major(b, "b", BY_NAME["bf16"], transposed=True)
    assert rows.stride(1) == 1 and ld % 16 == 0 and torch.equal(rows, b.t())
    w = torch.randn(5, 16).to(torch.bfloat16)  # an [N, K] weight passed as w.t(): used in place
    rows, ld = api._k_major(w.t(), "b", BY_NAME["bf16"], transposed=True)
    assert rows.data_ptr() == w.data_ptr() and ld == 32


def test_config_validation():
    bad = Sm80Config(128, 256, 128, 2, 4, 8)  # 384 KiB of shared memory
    with pytest.raises(LayoutError, match="shared memory"):
        bad.check(Arch(90))
    with pytest.raises(LayoutError, match="multiple of 16x16"):
        Sm80Config(128, 24, 128, 2, 2, 3).check(Arch(90))
    with pytest.raises(UnsupportedError, match="config: unknown name"):
        api._check_config("nope")


def test_arch_parsing():
    assert Arch.parse("sm_90a") == Arch(90, "a")
    assert Arch.parse("89").name == "sm_89"
    assert Arch.parse("9.0").cc == 90
    assert Arch.parse("sm_120").nvrtc_cc == "120"
    with pytest.raises(ValueError, match="arch: cannot parse"):
        Arch.parse("hopper")


def test_inputs_that_require_grad_are_refused_under_grad_mode():
    """gn_mm.mm has no backward: a tensor that requires grad would lose its gradient silently."""
    a, w = t((4, 16), torch.float8_e4m3fn), t((4, 16), torch.float8_e4m3fn)
    args = dict(scale_a=torch.ones(4), scale_b=torch.ones(4), bias=torch.ones(4), out=t((4, 4), torch.float32))
    for name in args:
        kw = dict(args, **{name: args[name].clone().requires_grad_()})
        with pytest.raises(UnsupportedError, match=f"{name}: requires grad; gn_mm.mm has no backward: call it under "
                                                   r"torch.no_grad\(\) or torch.inference_mode\(\)"):
            gn_mm.mm(a, w.t(), **kw)
        with torch.no_grad(), pytest.raises(ArchError):  # validated: only the CPU device is left to refuse
            gn_mm.mm(a, w.t(), **kw)
    wg = t((4, 16)).requires_grad_()
    with pytest.raises(UnsupportedError, match="b: requires grad"):
        gn_mm.mm(t((4, 16)), wg.t())
    with torch.inference_mode(), pytest.raises(ArchError):
        gn_mm.mm(t((4, 16)), wg.t())


class _AnyKey(dict):
    """A fast-call table that answers every key (the fast path without a GPU to validate a first call)."""

    def __init__(self, fast):
        super().__init__()
        self.fast = fast

    def get(self, key, default=None):
        return self.fast


def _fake_fast_path(monkeypatch, a, b, c):
    """Make gn_mm.mm take its fast path for CPU tensors like (a, b, c); returns the list of outputs it ran into."""
    ran = []

    class Fake(api._FastCall):
        def run(self, a, b, c, *args):
            ran.append(c)

    fast = Fake(None, tuple(c.shape), c.stride(), c.dtype, 0, {}, None, (api._extent(a), api._extent(b),
                                                                         api._extent(c)))
    monkeypatch.setattr(api, "_fast_calls", _AnyKey(fast))
    monkeypatch.setattr(api.runtime, "current_device", lambda: 0)
    return ran


def test_fast_path_keeps_the_grad_and_overlap_checks(monkeypatch):
    a, w = torch.randn(4, 16).to(torch.bfloat16), torch.randn(4, 16).to(torch.bfloat16)
    buf = t((4, 16))
    ran = _fake_fast_path(monkeypatch, a, w.t(), buf[:, :4])
    gn_mm.mm(a, w.t())
    assert len(ran) == 1  # the fast path is taken
    wg = w.clone().requires_grad_()
    with pytest.raises(UnsupportedError, match="b: requires grad"):
        gn_mm.mm(a, wg.t())
    with torch.no_grad():  # inference with weights that require grad keeps the fast path
        gn_mm.mm(a, wg.t())
    assert len(ran) == 2
    out = buf[:, :4]
    assert gn_mm.mm(a, w.t(), out=out) is out and ran[-1] is out
    with pytest.raises(LayoutError, match="out: overlaps a; pass a separate tensor"):
        gn_mm.mm(buf, w.t(), out=out)
    with pytest.raises(LayoutError, match="out: overlaps b"):
        gn_mm.mm(a, w.t(), out=w[:, :4])
    scale = torch.ones(4, requires_grad=True)
    with pytest.raises(UnsupportedError, match="scale_a: requires grad"):
        gn_mm.mm(a, w.t(), scale_a=scale)
    c32 = torch.zeros(4, 4)
    with pytest.raises(LayoutError, match="out: overlaps bias"):
        gn_mm.mm(a, w.t(), out=c32, bias=c32[1])
    assert len(ran) == 3


def test_out_errors_name_out():
    a, w = t((4, 8)), t((4, 8))
    with pytest.raises(TypeError, match="out: expected a torch.Tensor, got list"):
        gn_mm.mm(a, w.t(), out=[[0.0] * 4] * 4)
    with pytest.raises(UnsupportedError, match=r"out: dtype torch.float16 is not an output of bf16xbf16->f32; "
                                               r"allowed: torch.bfloat16, torch.float32"):
        gn_mm.mm(a, w.t(), out=t((4, 4), torch.float16))
    buf = t((4, 16))
    with pytest.raises(LayoutError, match="out: overlaps a; pass a separate tensor"):
        gn_mm.mm(buf[:, :8], w.t(), out=buf[:, 4:8])
    with pytest.raises(ArchError):  # beside a in the same rows, no byte shared: only the CPU device is left to refuse
        gn_mm.mm(buf[:, :8], w.t(), out=buf[:, 8:12])
    i8 = torch.zeros(4, 32, dtype=torch.int8)
    with pytest.raises(LayoutError, match="out: overlaps scale_b"):
        s = torch.ones(4, 4)
        gn_mm.mm(i8, i8.t(), scale_b=s[0], out=s)
    with pytest.raises(ArchError):  # apart in memory: only the CPU device is left to refuse
        gn_mm.mm(buf[:, :8], w.t(), out=t((4, 4)))


def test_option_types_are_named():
    a, w = t((4, 8)), t((4, 8))
    with pytest.raises(UnsupportedError, match="acc_dtype: expected a torch.dtype, got str 'float32'"):
        gn_mm.mm(a, w.t(), acc_dtype="float32")
    with pytest.raises(UnsupportedError, match=r"out_dtype: expected a torch.dtype, got str 'float32'; allowed: "
                                               "torch.bfloat16, torch.float32"):
        gn_mm.mm(a, w.t(), out_dtype="float32")
    # Unhashable values reach validation (not the fast-call table's "unhashable type").
    with pytest.raises(UnsupportedError, match=r"acc_dtype: expected a torch.dtype, got list \["):
        gn_mm.mm(a, w.t(), acc_dtype=[torch.float32])
    with pytest.raises(UnsupportedError, match=r"out_dtype: expected a torch.dtype, got dict"):
        gn_mm.mm(a, w.t(), out_dtype={})
    with pytest.raises(TypeError, match="config: expected a gn_mm.Sm80Config, gn_mm.Sm90Config or a config name, "
                                        "got list"):
        gn_mm.mm(a, w.t(), config=["mma.sync"])
    with pytest.raises(UnsupportedError, match=r"splits: expected a positive int, got \[2\]"):
        gn_mm.mm(a, w.t(), splits=[2])


def test_bias_must_be_n_or_1_by_n():
    assert api._bias(torch.ones(1, 4), 4, "f32").shape == (4,)
    assert api._bias(torch.ones(4), 4, "bf16").shape == (4,)
    for shape in ((4, 1), (2, 2), (1, 1, 4)):
        with pytest.raises(LayoutError, match=rf"bias: expected shape \[N\] or \[1, N\] with N = 4, got "
                                              rf"{re.escape(str(shape))}"):
            api._bias(torch.ones(shape), 4, "f32")


def test_non_strided_tensors_are_refused():
    a, w = t((4, 8)), t((4, 8))
    with pytest.raises(UnsupportedError, match="a: sparse tensors are not supported; pass a dense tensor"):
        gn_mm.mm(a.to_sparse(), w.t())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sparse CSR is beta
        csr = a.to_sparse_csr()
    with pytest.raises(UnsupportedError, match="a: sparse tensors are not supported"):
        gn_mm.mm(csr, w.t())
    with pytest.raises(UnsupportedError, match="out: sparse tensors are not supported"):
        gn_mm.mm(a, w.t(), out=t((4, 4)).to_sparse())
    i8 = torch.zeros(4, 32, dtype=torch.int8)
    with pytest.raises(UnsupportedError, match="bias: sparse tensors are not supported"):
        gn_mm.mm(i8, i8.t(), bias=torch.ones(4).to_sparse(), out_dtype=torch.float32)
    if torch.backends.mkldnn.is_available():
        with pytest.raises(UnsupportedError, match="a: torch._mkldnn tensors are not supported"):
            gn_mm.mm(torch.zeros(4, 8).to_mkldnn(), torch.zeros(4, 8).t())


def test_unpack_int4_takes_packed_bytes_only():
    with pytest.raises(TypeError, match=r"unpack_int4: data must be a 2-D torch.uint8 tensor .*got torch.int32"):
        gn_mm.unpack_int4(torch.zeros(2, 2, dtype=torch.int32))
    with pytest.raises(TypeError, match="got torch.int8"):
        gn_mm.unpack_int4(torch.zeros(2, 2, dtype=torch.int8), signed=False)
    with pytest.raises(TypeError, match=r"got torch.uint8 of shape \(4,\)"):
        gn_mm.unpack_int4(torch.zeros(4, dtype=torch.uint8))
    with pytest.raises(TypeError, match="got list"):
        gn_mm.unpack_int4([[1, 2]])
    assert gn_mm.unpack_int4(torch.tensor([[0xF8]], dtype=torch.uint8)).tolist() == [[-8, -1]]


def test_pack_int4_checks_range_before_narrowing():
    with pytest.raises(ValueError, match=r"pack_int4: values must lie in \[0, 15\]"):
        gn_mm.pack_int4(torch.tensor([[65539, 1]], dtype=torch.int32))  # int16 would wrap it to 3
    with pytest.raises(ValueError, match=r"\[-8, 7\]"):
        gn_mm.pack_int4(torch.tensor([[-65536 - 8, 0]]), signed=True)
    with pytest.raises(ValueError, match=r"\[0, 15\]"):
        gn_mm.pack_int4(torch.tensor([[255, 0]], dtype=torch.uint8))
    with pytest.raises(TypeError, match="pack_int4: values must be a 2-D integer tensor .*got torch.complex64"):
        gn_mm.pack_int4(torch.zeros(2, 2, dtype=torch.complex64))
    p = gn_mm.pack_int4(torch.tensor([[15, 3]], dtype=torch.int32))
    assert not p.signed and p.unpack().tolist() == [[15, 3]]


def test_options_are_validated_for_empty_problems():
    for shape_a, shape_b in (((0, 8), (8, 4)), ((4, 8), (8, 0)), ((4, 0), (0, 4))):
        a, b = t(shape_a, torch.float16), t(shape_b, torch.float16)
        with pytest.raises(UnsupportedError, match="config: unknown name 'bogus'"):
            gn_mm.mm(a, b, config="bogus")
        with pytest.raises(UnsupportedError, match="splits: expected a positive int, got 0"):
            gn_mm.mm(a, b, splits=0)
        with pytest.raises(UnsupportedError, match="splits: f16 accumulation cannot be split"):
            gn_mm.mm(a, b, splits=2, acc_dtype=torch.float16)
        with pytest.raises(UnsupportedError, match="^config: cannot parse 'sm90_bogus'"):
            gn_mm.mm(a, b, config="sm90_bogus")
        for bad in (2.0, True, "2"):
            with pytest.raises(UnsupportedError, match="splits: expected a positive int"):
                gn_mm.mm(a, b, splits=bad)


def test_integer_splits_of_any_integer_type_become_python_ints():
    variant = gn_mm.variant_table.find("f16", "f16", "f32")
    for given in (3, torch.tensor(3)):  # (numpy integers too: anything with __index__)
        got = api._splits_arg(given, variant)
        assert got == 3 and type(got) is int
    assert api._splits_arg(None, variant) is None


def test_broadcast_rows_are_copied():
    """Rows with stride 0 (v.expand) overlap: they are copied to K-contiguous storage like other layouts."""
    v = torch.arange(16).to(torch.bfloat16)
    a = v.expand(4, 16)  # strides (0, 1)
    rows, ld = api._k_major(a, "a", BY_NAME["bf16"], transposed=False)
    assert rows.stride(0) >= 16 and ld == 32 and torch.equal(rows, a)
    b = v[:, None].expand(16, 5)  # [K, N], strides (1, 0)
    rows, ld = api._k_major(b, "b", BY_NAME["bf16"], transposed=True)
    assert rows.stride(0) >= 16 and ld == 32 and torch.equal(rows, b.t())
    col = torch.ones(1, 1, dtype=torch.bfloat16).expand(4, 1)  # K = 1, strides (0, 1)
    rows, ld = api._k_major(col, "a", BY_NAME["bf16"], transposed=False)
    assert ld == 16 and torch.equal(rows, col)
    w = torch.randn(5, 16).to(torch.bfloat16)  # K-major rows apart: still used in place
    rows, ld = api._k_major(w.t(), "b", BY_NAME["bf16"], transposed=True)
    assert rows.data_ptr() == w.data_ptr() and ld == 32


def test_exported_dataclasses_have_docstrings():
    from gn_mm.sm80_w4a16 import W4A16Config
    from gn_mm.sm90_config import Sm90Config
    from gn_mm.variant_table import Variant

    for cls in (Sm80Config, Sm90Config, Variant, W4A16Config):
        assert cls.__doc__ and not cls.__doc__.startswith(cls.__name__ + "("), cls  # not dataclass's signature


def test_out_beside_its_input_in_one_buffer_is_not_an_overlap():
    """Column slices of one buffer (an input and the output written next to it) share no byte: accepted; any
    shared byte is refused (exact for rows a common stride apart)."""
    from gn_mm import api

    buf = torch.empty(8, 64, dtype=torch.bfloat16)
    api._check_overlap(buf[:, 32:], a=buf[:, :32])
    with pytest.raises(gn_mm.LayoutError, match="out: overlaps a"):
        api._check_overlap(buf[:, 31:], a=buf[:, :32])
    with pytest.raises(gn_mm.LayoutError, match="out: overlaps b"):
        api._check_overlap(buf[2:4], a=buf[:2], b=buf[3:5, :8])


def test_non_tensor_scale_is_named_not_an_attribute_error():
    a = torch.randn(4, 8).to(torch.int8)
    b = torch.randn(8, 4).to(torch.int8)
    with pytest.raises(Exception) as info:
        gn_mm.mm(a, b, scale_a=2.0, scale_b=torch.ones(1))
    assert not isinstance(info.value, AttributeError)
