import os
import threading
from pathlib import Path

import pytest

from gn_mm import cache, compiler, knobs, runtime, sm80_mm, variant_table as variants
from gn_mm.arch import Arch
from gn_mm.config import SM80_CONFIGS

S8 = variants.find("s8", "s8", "s32")  # the fastest variant to compile
CFG = SM80_CONFIGS[0]


def _spec(out="s32", cfg=CFG, arch=Arch(80)):
    return sm80_mm.spec(S8, out, cfg, arch)


def test_cache_dir_honours_env_and_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv("GN_MM_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert knobs.cache_dir() == tmp_path / "xdg" / "gn_mm"
    monkeypatch.setenv("GN_MM_CACHE_DIR", str(tmp_path / "mine"))
    assert knobs.cache_dir() == tmp_path / "mine"
    monkeypatch.chdir(tmp_path)
    rel = f"rel_{tmp_path.name}"
    monkeypatch.setenv("GN_MM_CACHE_DIR", rel)  # fixed when first read: a later chdir does not split the cache
    assert knobs.cache_dir() == tmp_path / rel
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert knobs.cache_dir() == tmp_path / rel
    monkeypatch.delenv("GN_MM_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/xdg")  # ignored (XDG spec): the default applies
    assert knobs.cache_dir() == Path.home() / ".cache" / "gn_mm"


def test_key_changes_with_every_codegen_input():
    base = _spec().source()
    k = runtime.cache_key(base, Arch(80), "13.0")
    assert k == runtime.cache_key(base, Arch(80), "13.0")  # deterministic
    assert k != runtime.cache_key(base + " ", Arch(80), "13.0")  # source (headers are inlined into it)
    assert k != runtime.cache_key(base, Arch(89), "13.0")  # options / arch
    assert k != runtime.cache_key(base, Arch(80), "13.1")  # NVRTC version
    assert _spec().source() != _spec(out="f32").source()
    assert _spec().source() != _spec(cfg=SM80_CONFIGS[1]).source()


def test_key_covers_package_version(monkeypatch):
    src = _spec().source()
    k = runtime.cache_key(src, Arch(80), "13.0")
    monkeypatch.setattr(runtime, "__version__", "999")
    assert runtime.cache_key(src, Arch(80), "13.0") != k


def test_miss_then_hit(fresh_cache):
    before = runtime.stats["compiles"]
    first = runtime.build(_spec(), backend="bindings")
    assert not first.from_disk and runtime.stats["compiles"] == before + 1
    second = runtime.build(_spec(), backend="bindings")
    assert second.from_disk and second.cubin == first.cubin
    assert runtime.stats["compiles"] == before + 1
    assert second.meta["log"] == first.meta["log"]


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage", "empty"])
def test_corrupt_entry_is_discarded_and_rebuilt(fresh_cache, damage):
    first = runtime.build(_spec(), backend="bindings")
    path = cache.entry_path(first.key)
    blob = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(blob[: len(blob) // 2])
    elif damage == "flip":
        path.write_bytes(blob[:-40] + bytes([blob[-40] ^ 1]) + blob[-39:])
    elif damage == "garbage":
        path.write_bytes(b"not a cubin at all")
    else:
        path.write_bytes(b"")
    assert cache.load(first.key) is None
    assert not path.exists()  # discarded
    again = runtime.build(_spec(), backend="bindings")
    assert not again.from_disk and again.cubin == first.cubin
    assert cache.load(first.key) is not None  # rebuilt


def test_publish_is_atomic_under_concurrent_writers(fresh_cache):
    key = "ab" * 32
    payloads = [bytes([i]) * 200_000 for i in range(8)]
    errors = []

    def writer(p):
        try:
            for _ in range(5):
                cache.store(key, p, {"n": p[0]})
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def reader():
        for _ in range(50):
            hit = cache.load(key)
            if hit is not None:
                cubin, meta = hit
                assert cubin == bytes([meta["n"]]) * 200_000  # never a mix of two writers

    threads = [threading.Thread(target=writer, args=(p,)) for p in payloads] + [threading.Thread(target=reader)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert cache.load(key) is not None
    leftovers = [f for f in cache.entry_path(key).parent.iterdir() if f.name.endswith(".tmp")]
    assert leftovers == []


def test_disabled_disk_cache_never_writes(fresh_cache, monkeypatch):
    monkeypatch.setenv("GN_MM_NO_DISK_CACHE", "1")
    built = runtime.build(_spec(), backend="bindings")
    assert not cache.entry_path(built.key).exists()


def test_dump_writes_rendered_source(fresh_cache, monkeypatch, tmp_path):
    monkeypatch.setenv("GN_MM_DUMP", "1")
    monkeypatch.setenv("GN_MM_DUMP_DIR", str(tmp_path / "dump"))
    spec = _spec()
    runtime.build(spec, backend="bindings")
    files = list((tmp_path / "dump").glob("sm80_mm_sm_80_*.cu"))
    assert len(files) == 1 and files[0].read_text() == spec.source()


def test_compile_error_carries_log_and_dumped_source(fresh_cache, monkeypatch, tmp_path):
    monkeypatch.setenv("GN_MM_DUMP_DIR", str(tmp_path / "dump"))
    spec = runtime.KernelSpec.make("sm80_mm", "sm80_mm",
                                   dict(_spec().params, instr="mma.sync.not.an.instruction"), Arch(80))
    from gn_mm.errors import CompileError

    with pytest.raises(CompileError) as info:
        runtime.build(spec, backend="bindings")
    assert os.path.isfile(info.value.source_path)
    assert "not.an.instruction" in open(info.value.source_path).read()
    assert info.value.log


def test_unwritable_cache_dir_still_builds(fresh_cache, monkeypatch, tmp_path):
    """A cache directory that cannot be written (here: below a plain file, which fails for root too) costs the disk
    cache, with one warning, never the build."""
    (tmp_path / "a_file").write_text("")
    monkeypatch.setenv("GN_MM_CACHE_DIR", str(tmp_path / "a_file" / "cache"))
    monkeypatch.setattr(runtime, "_warned", set())
    with pytest.warns(RuntimeWarning, match="cannot write the kernel cache"):
        built = runtime.build(_spec(), backend="bindings")
    assert built.cubin[:4] == b"\x7fELF" and not built.from_disk


def test_entries_are_readable_as_the_umask_allows(fresh_cache):
    """mkstemp creates 0600 files: published as they are, a cache warmed by one user (an image built as root) would
    miss for every other user."""
    built = runtime.build(_spec(), backend="bindings")
    assert cache.entry_path(built.key).stat().st_mode & 0o777 == 0o666 & ~_umask_now()


def _umask_now() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_corrupt_entry_that_cannot_be_deleted_is_a_miss(fresh_cache, monkeypatch):
    first = runtime.build(_spec(), backend="bindings")
    cache.entry_path(first.key).write_bytes(b"garbage")

    def refuse(self, missing_ok=False):
        raise PermissionError(13, "read-only cache")

    monkeypatch.setattr(cache.Path, "unlink", refuse)
    assert cache.load(first.key) is None


def test_compile_error_survives_an_unwritable_dump_dir(fresh_cache, monkeypatch, tmp_path):
    (tmp_path / "a_file").write_text("")
    monkeypatch.setenv("GN_MM_DUMP_DIR", str(tmp_path / "a_file" / "dump"))
    monkeypatch.setattr(runtime, "_warned", set())
    spec = runtime.KernelSpec.make("sm80_mm", "sm80_mm",
                                   dict(_spec().params, instr="mma.sync.not.an.instruction"), Arch(80))
    from gn_mm.errors import CompileError

    with pytest.warns(RuntimeWarning, match="not dumped"), pytest.raises(CompileError) as info:
        runtime.build(spec, backend="bindings")
    assert info.value.source_path is None and info.value.log


def test_nvrtc_version_is_reported():
    assert compiler.nvrtc_version("bindings").count(".") == 1


def test_dependent_launch_structs_match_the_driver_abi():
    """CUlaunchConfig / CUlaunchAttribute as cuda.h lays them out on 64-bit hosts (cuLaunchKernelEx reads them)."""
    import ctypes

    from gn_mm import runtime

    assert ctypes.sizeof(runtime._LaunchAttribute) == 72  # id, 4 bytes of padding, a 64-byte value union
    assert runtime._LaunchAttribute.value.offset == 8
    cfg = runtime._LaunchConfig
    assert (cfg.shared_mem.offset, cfg.stream.offset, cfg.attrs.offset, cfg.num_attrs.offset) == (24, 32, 40, 48)
    assert ctypes.sizeof(cfg) == 56
