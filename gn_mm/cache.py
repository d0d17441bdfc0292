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
import secrets
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
    # Write a temp file in the same directory, then rename: readers see all of it or nothing. Created 0666 (less the
    # process's umask, as any file it writes; mkstemp's 0600 would keep a cache warmed by one user from the others).
    tmp = path.parent / f".{key[:8]}-{os.getpid()}-{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path

