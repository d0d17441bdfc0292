import os

import pytest
import torch


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU (skipped without one)")


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="no CUDA GPU: GPU tier runs on the device machine (scripts/gpu_check.sh)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def _cache_in(path, monkeypatch):
    """The on-disk cache at `path` (enabled) and an empty in-memory kernel table, restored afterwards."""
    from gn_mm import runtime

    monkeypatch.setenv("GN_MM_CACHE_DIR", str(path))
    monkeypatch.delenv("GN_MM_NO_DISK_CACHE", raising=False)
    saved = dict(runtime._loaded)
    runtime.clear_memory_cache()
    yield path
    runtime._loaded.clear()
    runtime._loaded.update(saved)


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """An empty on-disk cache and an empty in-memory kernel table."""
    yield from _cache_in(tmp_path / "cache", monkeypatch)


@pytest.fixture(scope="session")
def _compile_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("compile_cache")


@pytest.fixture
def compile_cache(_compile_dir, monkeypatch):
    """One on-disk cache for the offline compile checks, which build some kernels alike (the large-problem config of a
    variant is also among its candidates; `variants --compile` builds the instruction loops the microbenchmark check
    builds): each compiles once. Only these checks write it, all through NVRTC's bindings, so every entry keeps the
    ptxas log they read. The in-memory kernel table starts empty, as with `fresh_cache`."""
    yield from _cache_in(_compile_dir, monkeypatch)


@pytest.fixture(scope="session", autouse=True)
def _session_cache(tmp_path_factory):
    """Tests never touch the user's cache unless GN_MM_CACHE_DIR is set by the caller."""
    if "GN_MM_CACHE_DIR" not in os.environ:
        os.environ["GN_MM_CACHE_DIR"] = str(tmp_path_factory.mktemp("gn_mm_cache"))
    yield
