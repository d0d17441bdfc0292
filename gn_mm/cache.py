"""On-disk cubin cache: one file per key, published atomically, verified on every read.

File layout: MAGIC, 8-byte payload length, payload, 32-byte SHA-256 of the payload. The payload is a JSON
header line (metadata such as the compile log) followed by the cubin. A short, corrupt or foreign file is a
miss: it is deleted (where the directory allows) and the caller rebuilds it. Entries are readable by everyone the
umask allows (a cache warmed by one user serves others); a directory that cannot be written makes `store` raise
OSError, which the caller treats as "not cached" (runtime.build).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from . import knobs

MAGIC = b"GNMM-CUBIN-1\n"


def entry_path(key: str) -> Path:
    return knobs.cache_dir() / "cubin" / key[:2] / f"{key}.bin"


def load(key: str) -> tuple[bytes, dict] | None:
    path = entry_path(key)
    try:
        blob = path.read_bytes()
    except OSError:
        return None
    head = len(MAGIC) + 8
    ok = blob.startswith(MAGIC) and len(blob) >= head + 32
    if ok:
        size = int.from_bytes(blob[len(MAGIC):head], "little")
        payload, digest = blob[head:head + size], blob[head + size:]
        ok = len(payload) == size and digest == hashlib.sha256(payload).digest()
    if not ok:
        try:
            path.unlink(missing_ok=True)
        except OSError:  # a read-only cache: still a miss
            pass
        return None
    meta_line, _, cubin = payload.partition(b"\n")
    return cubin, json.loads(meta_line)


def store(key: str, cubin: bytes, meta: dict) -> Path:
    path = entry_path(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = json.dumps(meta, sort_keys=True).encode() + b"\n" + cubin
    blob = MAGIC + len(payload).to_bytes(8, "little") + payload + hashlib.sha256(payload).digest()
    # Write a private temp file in the same directory, then rename: readers see all of it or nothing.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{key[:8]}-", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp makes it 0600: published as a normal file would be
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _read_umask() -> int:
    """The process umask, read without changing it where Linux reports it (os.umask can only read it by setting
    it, which would race with other threads creating files); otherwise set and restored once, at import."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _read_umask()
