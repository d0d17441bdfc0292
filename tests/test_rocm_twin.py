"""The ROCm twin of the W4A16 kernel, without an AMD GPU: it compiles (hipRTC for gfx90a, the compiler ROCm torch
uses at run time; hipcc for gfx940, which Debian's HIP 5.2 hipRTC crashes on), and gn_mm's ROCm dispatch is
exercised with torch's compiler mocked. Its numerics have never run on AMD hardware here (README, "ROCm").

CI installs Debian's hipcc / libhiprtc-builtins5 and sets GN_MM_REQUIRE_HIP=1, so these checks cannot skip there.
"""

import os
import shutil
import subprocess

import pytest
import torch

import gn_mm
from gn_mm import rocm_w4a16, w4a16, w4a16_formats as fmt

REQUIRED = os.environ.get("GN_MM_REQUIRE_HIP") == "1"
VARIANTS = [(dt, z) for dt in (torch.float16, torch.bfloat16) for z in (False, True)]


def _need(ok: bool, what: str):
    if not ok:
        if REQUIRED:
            pytest.fail(f"{what} is required here (GN_MM_REQUIRE_HIP=1) but missing")
        pytest.skip(f"{what} not installed (apt-get install hipcc libhiprtc-builtins5)")


@pytest.mark.parametrize("dtype,zeros", VARIANTS)
def test_twin_compiles_with_hiprtc_for_gfx90a(dtype, zeros):
    _need(rocm_w4a16.hiprtc_available(), "hipRTC")
    code = rocm_w4a16.compile_offline(rocm_w4a16.source(dtype, zeros), "gfx90a")
    assert code[:4] == b"\x7fELF"


@pytest.mark.parametrize("dtype,zeros", VARIANTS)
def test_twin_compiles_with_hipcc_for_gfx940(dtype, zeros, tmp_path):
    _need(shutil.which("hipcc") is not None, "hipcc")
    src = tmp_path / "rocm_w4a16.hip"
    src.write_text(rocm_w4a16.source(dtype, zeros))
    out = tmp_path / "k.o"
    # hipRTC's own predefinitions come from hip_runtime.h under hipcc; the flags are the ones torch adds.
    r = subprocess.run(["hipcc", "--offload-arch=gfx940", "--cuda-device-only", "-c", "-O3", "-include",
                        "hip/hip_runtime.h", "-x", "hip", *rocm_w4a16.TORCH_HIPRTC_FLAGS, str(src), "-o", str(out)],
                       capture_output=True, text=True, env={**os.environ, "HIP_PLATFORM": "amd"}, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert out.stat().st_size > 0


class _FakeKernel:
    def __init__(self):
        self.calls = []

    def __call__(self, grid, block, args, shared_mem=0):
        self.calls.append((grid, block, args))


def test_rocm_dispatch_with_the_compiler_mocked(monkeypatch):
    compiled = []
    kernel = _FakeKernel()

    def fake_compile(source, name, *args, **kwargs):
        compiled.append((source, name))
        return kernel

    monkeypatch.setattr(torch.version, "hip", "6.2.41133", raising=False)
    monkeypatch.setattr(torch.cuda, "_compile_kernel", fake_compile)
    monkeypatch.setattr(w4a16, "can_implement", lambda *a, **k: [])  # CPU tensors stand in for ROCm ones
    rocm_w4a16._kernel.cache_clear()
    k, n, g, m = 256, 136, 64, 3
    qweight = fmt.pack_nibbles(torch.randint(0, 16, (k, n)), dim=1)
    scales = torch.rand(k // g, n).bfloat16()
    qzeros = fmt.pack_nibbles(torch.randint(0, 16, (k // g, n)), dim=1)
    w = gn_mm.prepare_w4a16(qweight, scales, qzeros, group_size=g)
    assert w.layout == "gptq" and w.packed.data_ptr() == qweight.data_ptr()  # the twin reads GPTQ as is
    a = torch.randn(m, k).bfloat16()
    bias = torch.randn(n).bfloat16()
    out = gn_mm.w4a16_mm(a, w, bias=bias)
    gn_mm.w4a16_mm(a, w)
    assert out.shape == (m, n) and out.dtype == torch.bfloat16
    assert len(compiled) == 1, "one compile per (dtype, zero points, device)"
    source, name = compiled[0]
    assert name == "rocm_w4a16" and "__builtin_amdgcn_mfma_f32_16x16x16bf16_1k" in source
    assert "#define GN_ACT_BF16 1" in source and "#define GN_HAS_ZEROS 1" in source
    grid, block, args = kernel.calls[0]
    assert grid == (-(-n // 64), 1, 1) and block == (256, 1, 1)
    assert args[0] is a and args[1] is w.packed and args[2] is w.scales and args[3] is w.zeros and args[4] is bias
    assert args[6:] == [m, n, k, k, g, 8, 1]
    assert kernel.calls[1][2][-1] == 0  # no bias
    rocm_w4a16._kernel.cache_clear()


def test_cuda_path_refuses_a_rocm_prepared_weight(monkeypatch):
    qweight = fmt.pack_nibbles(torch.randint(0, 16, (128, 64)), dim=1)
    w = fmt.prepare(qweight, torch.rand(1, 64).half(), group_size=128, layout="gptq")
    monkeypatch.setattr(w4a16, "can_implement", lambda *a, **k: [])
    monkeypatch.setattr(torch.version, "hip", None, raising=False)
    with pytest.raises(gn_mm.LayoutError, match="prepared in the 'gptq' layout"):
        gn_mm.w4a16_mm(torch.randn(2, 128).half(), w)


def test_can_implement_names_the_argument():
    qweight = fmt.pack_nibbles(torch.randint(0, 16, (128, 64)), dim=1)
    scales = torch.rand(2, 64).half()
    assert any("a: on cpu" in p for p in gn_mm.w4a16_can_implement(torch.randn(2, 128).half(), qweight, scales,
                                                                   group_size=64))
    assert any("a: dtype torch.float32" in p for p in gn_mm.w4a16_can_implement(torch.randn(2, 128), qweight,
                                                                                scales, group_size=64))
    assert any("differs from the scales" in p for p in gn_mm.w4a16_can_implement(torch.randn(2, 128).bfloat16(),
                                                                                 qweight, scales, group_size=64))
    assert gn_mm.w4a16_can_implement(None, qweight, scales, group_size=64) == []
    assert any("zp_bias" in p for p in gn_mm.w4a16_can_implement(None, qweight, scales, group_size=64, zp_bias=16))
    with pytest.raises(gn_mm.UnsupportedError, match="g_idx: act-order"):
        gn_mm.w4a16_mm(torch.randn(2, 128).half(), qweight, scales, group_size=64, g_idx=torch.arange(128))
