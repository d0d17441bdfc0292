import json

import pytest
import torch

from gn_mm import bench, cli, plots

ROWS = {"environment": {"gpu": "test GPU", "sms": 1, "torch": "x", "nvrtc": "13.0"}, "rows": [
    {"variant": "bf16", "m": 16, "n": 32, "k": 64, "peer": "torch.matmul", "ours_tflops": 1.0, "peer_tflops": 2.0,
     "ratio": 0.5},
    {"variant": "s8 -> s32", "m": 16, "n": 32, "k": 64, "peer": "torch._int_mm", "ours_tflops": 3.0,
     "peer_error": "refused"},
    {"variant": "s4 -> s32", "m": 1, "n": 1, "k": 1, "error": "RuntimeError: boom"}]}


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU message")
def test_bench_without_gpu_explains(capsys):
    assert cli.main(["bench", "--quick"]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err


def test_bench_rejects_unknown_variants():
    with pytest.raises(SystemExit):
        cli.main(["bench", "--variants", "bf16,nope"])


def test_markdown_and_files(tmp_path):
    md = bench.markdown(ROWS)
    assert "| bf16 | 16 | 32 | 64 | 1.0 | torch.matmul | 2.0 | 0.50 |" in md
    assert "n/a (refused)" in md and "error: RuntimeError: boom" in md
    written = bench.save(ROWS, str(tmp_path / "b"))
    assert json.loads((tmp_path / "b.json").read_text()) == ROWS
    pytest.importorskip("matplotlib")
    assert str(tmp_path / "b.png") in written
    assert (tmp_path / "b.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_markdown_with_graph_times():
    rows = json.loads(json.dumps(ROWS))
    rows["rows"][0].update(graph_ours_us=10.0, graph_peer_us=12.5, graph_ratio=1.25)
    md = bench.markdown(rows)
    assert "| bf16 | 16 | 32 | 64 | 1.0 | torch.matmul | 2.0 | 0.50 | 10.0 / 12.5 | 1.25 |" in md
    assert "graph ratio" in md and "CUDA-graph replay" in md
    assert "| s8 -> s32 | 16 | 32 | 64 | 3.0 | torch._int_mm | n/a (refused) | - | | |" in md
    assert "graph" not in bench.markdown(ROWS)


def test_chart_without_matplotlib_is_skipped(monkeypatch, tmp_path):
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    assert plots.bench_chart(ROWS, str(tmp_path / "x.png")) is None


@pytest.mark.parametrize("argv, says", [
    (["compile", "--arch", "sm_75"], "older than sm_80"), (["compile", "--arch", "sm90x"], "cannot parse"),
    (["compile", "--arch", " , "], "no architecture"), (["variants", "--arch", "sm_70"], "older than sm_80"),
    (["compile", "--arch", "sm_80", "--variants", "bf16,nosuch"], "nosuch match no kernel"),
    (["sol", "--sizes", "4k"], "comma-separated integers"), (["w4a16-bench", "--ms", "1,x"], "comma-separated"),
    (["w4a16-bench", "--shapes", "4096*4096"], "K x N pairs")])
def test_bad_arguments_are_usage_errors(argv, says, capsys):
    """Typos exit with a usage error (2) that says what is wrong: no traceback, no empty table that succeeds."""
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code == 2 and says in capsys.readouterr().err


@pytest.mark.skipif(torch.version.cuda is not None, reason="checks a CPU build of torch")
def test_torch_front_end_on_a_cpu_torch_explains(capsys):
    assert cli.main(["compile", "--arch", "sm_80", "--variants", "s8", "--backend", "torch"]) == 1
    assert "--backend bindings" in capsys.readouterr().err


def test_option_lists_drop_blanks():
    assert cli._items("bf16, s8,") == ["bf16", "s8"] and [a.name for a in cli._archs("sm_80, sm_90a,")] == \
        ["sm_80", "sm_90a"]
