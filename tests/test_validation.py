"""Bad input raises a clear error naming the argument; these checks need no GPU."""

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
    with pytest.raises(LayoutError, match=r"bias: expected shape \[4\]"):
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
        api._config("nope", 1, 1, Arch(90), 132, 227 * 1024, gn_mm.MMA_SYNC[0])


def test_arch_parsing():
    assert Arch.parse("sm_90a") == Arch(90, "a")
    assert Arch.parse("89").name == "sm_89"
    assert Arch.parse("9.0").cc == 90
    assert Arch.parse("sm_120").nvrtc_cc == "120"
    with pytest.raises(ValueError, match="arch: cannot parse"):
        Arch.parse("hopper")
