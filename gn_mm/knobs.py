"""Every GN_MM_* environment variable, declared once: name, type, default and meaning.

Values are read when used (not at import), so tests and users can change them at run time.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Knob:
    name: str
    default: str
    doc: str

    def raw(self) -> str:
        return os.environ.get(self.name, self.default)

    def flag(self) -> bool:
        return self.raw().strip().lower() not in ("", "0", "false", "no", "off")


CACHE_DIR = Knob("GN_MM_CACHE_DIR", "", "Directory of the on-disk kernel cache "
                 "(default: $XDG_CACHE_HOME/gn_mm, else ~/.cache/gn_mm).")
NO_DISK_CACHE = Knob("GN_MM_NO_DISK_CACHE", "0", "1: never read or write the on-disk kernel cache.")
DUMP = Knob("GN_MM_DUMP", "0", "1: write every rendered kernel source to the dump directory.")
DUMP_DIR = Knob("GN_MM_DUMP_DIR", "", "Where rendered sources go (default: <cache dir>/dump). "
                "Sources that fail to compile are always written there.")

ALL = (CACHE_DIR, NO_DISK_CACHE, DUMP, DUMP_DIR)


_absolute: dict = {}  # GN_MM_CACHE_DIR value -> the directory it named when first read


def cache_dir() -> Path:
    """GN_MM_CACHE_DIR (made absolute: a process that changes directory keeps one cache), else
    $XDG_CACHE_HOME/gn_mm (a relative XDG_CACHE_HOME is ignored, as the XDG spec says), else ~/.cache/gn_mm."""
    if CACHE_DIR.raw():
        raw = CACHE_DIR.raw()
        if raw not in _absolute:
            _absolute[raw] = Path(raw).expanduser().absolute()
        return _absolute[raw]
    xdg = Path(os.environ.get("XDG_CACHE_HOME", "")).expanduser()
    base = xdg if xdg.is_absolute() else Path.home() / ".cache"
    return base / "gn_mm"


def dump_dir() -> Path:
    return Path(DUMP_DIR.raw()).expanduser() if DUMP_DIR.raw() else cache_dir() / "dump"
