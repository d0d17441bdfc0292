"""The speed-of-light command: datasheet lookup, the report from measurements (CPU), the full command (GPU)."""

import json

import pytest
import torch

from gn_mm import cli, datasheet, microbench, runtime, sass, sol
from gn_mm.arch import Arch
from gn_mm.errors import ArchError
from gn_mm.variant_table import MMA_SYNC, WGMMA


@pytest.mark.parametrize("name,label", [("NVIDIA H100 80GB HBM3", "H100 SXM"), ("NVIDIA H100 PCIe", "H100 PCIe"),
                                        ("NVIDIA H200", "H200 SXM"), ("NVIDIA A100-SXM4-40GB", "A100 SXM 40GB"),
                                        ("NVIDIA A100 80GB PCIe", "A100 PCIe 80GB"),
                                        ("NVIDIA GeForce RTX 4090", "RTX 4090")])
def test_datasheet_lookup(name, label):
    found, peaks = datasheet.lookup(name)
    assert found == label and set(peaks) == {"bf16", "f16", "f16acc", "tf32", "fp8", "int8", "int4", "bw"}


def test_datasheet_unknown_gpu():
    assert datasheet.lookup("Tesla T4") is None


def test_every_variant_is_refused_below_its_arch():
    for v in MMA_SYNC + WGMMA:
        below = [Arch(75)] if v.min_arch == 80 else [Arch(80), Arch(86)]
        if v.path == "wgmma":
            below = [Arch(89), Arch(100, "a"), Arch(120)]
        why = "exists on sm_90a only" if v.path == "wgmma" else f"needs {v.arch_name} or newer"
        for arch in below:
            with pytest.raises(ArchError, match=why):
                microbench.spec(v, arch)


def _fake_result():
    def ceil(dtype, path, tflops):
        return {"dtype": dtype, "path": path, "tflops": tflops, "sass_ok": True}

    return {
        "environment": {"gpu": "NVIDIA H100 80GB HBM3", "sms": 132, "torch": "x", "nvrtc": "13.0"},
        "ceilings": [ceil("bf16", "mma.sync", 538.0), ceil("bf16", "wgmma", 930.0), ceil("s4", "mma.sync", 41.5)],
        "matmul": [
            {"dtype": "bf16", "m": 4096, "ours_tflops": 411.0, "peer_tflops": 783.0, "peer": "torch.matmul"},
            {"dtype": "bf16", "m": 8192, "ours_tflops": 383.0, "peer_tflops": 788.0, "peer": "torch.matmul"},
            {"dtype": "bf16", "m": 1024, "ours_tflops": 999.0, "error": "mismatch vs peer"},  # never "best"
            {"dtype": "s4", "m": 4096, "ours_tflops": 42.5, "peer_tflops": None},
        ],
        "skipped": [{"dtype": "s4", "size": 16384, "why": "not enough free GPU memory"}],
        "bandwidth": {"gbs": 3000.0, "bytes": 1 << 30},
        "datasheet": {"label": "H100 SXM", **datasheet.lookup("H100")[1]},
    }


def test_report_from_measurements(tmp_path):
    result = _fake_result()
    result["rows"] = sol.summarize(result, ["bf16", "s4"])
    bf16, s4 = result["rows"]
    assert bf16["gn_mm"] == 411.0 and bf16["gn_mm_size"] == 4096 and bf16["vendor_tflops"] == 788.0
    assert bf16["pct_ceiling"] == pytest.approx(100 * 411 / 930) and bf16["x_vendor"] == pytest.approx(411 / 788)
    assert bf16["errors"] == ["mismatch vs peer"]
    assert s4["vendor"] is None and s4["datasheet"] is None and s4["pct_ceiling"] == pytest.approx(100 * 42.5 / 41.5)
    text = sol.markdown(result)
    assert "| bf16 | 989 | 538 | 930 | 411 [4096] | 44% | 42% | torch.matmul | 788 [8192] | 0.52 |" in text
    assert "datasheet 3350 GB/s (90%)" in text and "skipped s4 16384^3" in text
    written = sol.save(result, str(tmp_path / "sol"))
    assert json.loads((tmp_path / "sol.json").read_text())["rows"][0]["dtype"] == "bf16"
    pytest.importorskip("matplotlib")
    assert str(tmp_path / "sol.png") in written and (tmp_path / "sol.png").stat().st_size > 1000


def test_sustained_report(tmp_path):
    from gn_mm import plots, report, sol_sustained

    row = {"dtype": "bf16", "size": 8192, "loop": "wgmma", "vendor": "torch.matmul", "vendor_tflops": 745.4,
           "gn_mm_tflops": 757.3, "loop_tflops": 807.1}
    row.update(loop_x_vendor=807.1 / 745.4, gn_mm_x_vendor=757.3 / 745.4, gn_mm_pct_loop=100 * 757.3 / 807.1,
               vendor_pct_loop=100 * 745.4 / 807.1)
    broken = {"dtype": "e4m3", "size": 8192, "error": "RuntimeError: no fp8"}
    result = {"environment": {"gpu": "H100", "sms": 132, "torch": "2.x", "nvrtc": "13.0"},
              "sustained": [row, broken], "skipped": ["s4"]}
    text = sol_sustained.markdown(result)
    assert "| bf16 | 8192^3 | wgmma | torch.matmul | 745 | 757 | 807 | 1.083 | 1.016 | 93.8% | 92.4% |" in text
    assert "| e4m3 | 8192^3 | error: RuntimeError: no fp8 |" in text and "instruction on this GPU for: s4" in text
    written = report.write(result, str(tmp_path / "s"), text, plots.sustained_chart)
    assert json.loads((tmp_path / "s.json").read_text())["sustained"][0]["size"] == 8192
    pytest.importorskip("matplotlib")
    assert str(tmp_path / "s.png") in written and (tmp_path / "s.png").stat().st_size > 1000


def test_sol_sustained_without_gpu_explains(capsys):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert cli.main(["sol", "--sustained"]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err


def test_sol_without_gpu_explains(capsys):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert cli.main(["sol", "--quick"]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err


def _on_device_variants():
    if not torch.cuda.is_available():
        return []
    cc = Arch.of_device().cc
    return [v for v in MMA_SYNC + WGMMA if v.runs_on(cc) and v.a == v.b]


@pytest.mark.gpu
@pytest.mark.skipif(sass.disassembler() is None, reason="no cuobjdump/nvdisasm on this machine")
@pytest.mark.parametrize("variant", _on_device_variants(), ids=lambda v: f"{v.path}:{v.name}")
def test_microbenchmark_sass_on_device(variant):
    """The binary the GPU runs (compiled by torch's NVRTC) executes the opcode the table promises."""
    arch = Arch.of_device()
    text = sass.disassemble(runtime.build(microbench.spec(variant, arch)).cubin)
    expected = "emulated" if arch.cc in variant.emulated_on else "native"
    assert sass.classify(variant.a, sass.tensor_core_mix(text), variant.path) == expected
    assert microbench.mma_ceiling(variant, iters=64, reps=3)["tflops"] > 1.0


@pytest.mark.gpu
def test_sol_sustained_measures_one_size(tmp_path):
    from gn_mm import sol_sustained

    for family in (None, "mma.sync"):
        row = sol_sustained.measure_one("bf16", 2048, torch.device("cuda"), reps=6, family=family)
        assert row["loop_tflops"] > 0 and row["vendor_tflops"] > 0 and row["gn_mm_tflops"] > 0
        assert row["loop_x_vendor"] > 0.3 and 0.2 < row["gn_mm_x_vendor"] < 5
        assert row["loop"] == ("ldmatrix" if family or torch.cuda.get_device_capability() < (9, 0) else "wgmma")


@pytest.mark.gpu
def test_sol_quick_writes_its_outputs(tmp_path, capsys):
    stem = tmp_path / "sol"
    assert cli.main(["sol", "--quick", "--out", str(stem)]) == 0
    result = json.loads((tmp_path / "sol.json").read_text())
    assert {r["dtype"] for r in result["rows"]} == set(sol.DTYPES)
    for r in result["rows"]:
        assert r["sass_ok"] and not r["errors"] and r["gn_mm"] > 0 and r["mma.sync_ceiling"] > 0
    assert (tmp_path / "sol.md").read_text().startswith("GPU: ")
    assert result["bandwidth"]["gbs"] > 100
    pytest.importorskip("matplotlib")
    assert (tmp_path / "sol.png").stat().st_size > 1000
