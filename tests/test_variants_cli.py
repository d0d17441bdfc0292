"""The variant table as data and through `python -m gn_mm variants`, checked against the hardware compiler:
each variant's instruction compiled offline must be native or emulated exactly where the table says."""

import json

import pytest

import gn_mm
from gn_mm import cli, sass, variant_table as variants
from gn_mm.arch import Arch

ARCHS = ["sm_80", "sm_89", "sm_90a", "sm_120"]


def test_variants_filter_by_arch():
    every = gn_mm.variants("sm_120")
    assert len(every) == len(variants.MMA_SYNC)
    sm80 = gn_mm.variants("sm_80")
    assert {r["a"] for r in sm80} == {"bf16", "f16", "s8", "u8", "s4", "u4", "tf32"}  # no fp8 below sm_89
    row = next(r for r in gn_mm.variants(Arch.parse("sm_90a")) if (r["a"], r["acc"]) == ("e4m3", "f16"))
    assert row["emulated"] is True and row["min_arch"] == "sm_89" and row["outs"] == ["f16"]
    assert row["instr"] == "mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16"


@pytest.mark.skipif(sass.disassembler() is None, reason="no cuobjdump/nvdisasm (pip install nvidia-cuda-cuobjdump)")
@pytest.mark.parametrize("arch", ARCHS)
def test_sass_agrees_with_the_table(arch, capsys, compile_cache):
    assert cli.main(["variants", "--arch", arch, "--compile", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and all(not r["spills"] for r in rows)
    for r in rows:
        expected = "emulated" if r["emulated"] else "native"
        assert r["sass"] == expected, (arch, r["a"], r["b"], r["acc"], r["sass_ops"])


def test_cli_without_gpu_lists_every_variant(capsys):
    assert cli.main(["variants"] + ([] if gn_mm.variants() and not _has_gpu() else ["--arch", "sm_90a"])) == 0
    out = capsys.readouterr().out
    assert "mma.sync.aligned.m16n8k64.row.col.satfinite.s32.s4.s4.s32" in out


def test_compile_without_arch_or_gpu_explains(capsys):
    if _has_gpu():
        pytest.skip("a GPU is present: the current one is used")
    assert cli.main(["variants", "--compile"]) == 2
    assert "pass --arch" in capsys.readouterr().err


def _has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()
