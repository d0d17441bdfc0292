"""Kernel sources: split a .cu file at its marker, render the Jinja header, inline the includes.

The result is one self-contained source string. It is what NVRTC compiles, what the cache key hashes and
what GN_MM_DUMP writes, so a dumped file reproduces the binary anywhere.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import jinja2

MARKER = "// ---- kernel ----"
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"\s*$', re.M)


def _data_dir(name: str) -> Path:
    """cuda_src/ or codegen/: inside the installed package, or beside it in a source checkout."""
    here = Path(__file__).resolve().parent
    for candidate in (here / name, here.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"gn_mm data directory {name!r} not found next to {here}")


def cuda_src_dir() -> Path:
    return _data_dir("cuda_src")


def codegen_dir() -> Path:
    return _data_dir("codegen")


def split(text: str, path: str = "<source>") -> tuple[str, str]:
    """(header section, kernel section) of a kernel file; exactly one marker line is required."""
    lines = text.splitlines(keepends=True)
    hits = [i for i, line in enumerate(lines) if line.strip() == MARKER]
    if len(hits) != 1:
        raise ValueError(f"{path}: expected exactly one marker line {MARKER!r}, found {len(hits)}")
    i = hits[0]
    return "".join(lines[:i]), "".join(lines[i + 1:])


@functools.lru_cache(maxsize=None)
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(codegen_dir())),
        undefined=jinja2.StrictUndefined,  # a missing parameter is an error, never an empty string
        keep_trailing_newline=True,
    )


def _inline(text: str, name: str, first_line: int, base: Path, seen: set[Path]) -> str:
    """Replace each #include "x" with the file's contents (once per file, like #pragma once).

    #line directives keep compiler messages pointing at the original file and line.
    """
    out = [f'#line {first_line} "{name}"\n']
    for n, line in enumerate(text.splitlines(keepends=True), start=first_line):
        match = _INCLUDE.match(line)
        if not match:
            out.append(line)
            continue
        path = (base / match.group(1)).resolve()
        if path not in seen:
            seen.add(path)
            rel = path.relative_to(cuda_src_dir()).as_posix()
            out.append(_inline(path.read_text(), rel, 1, path.parent, seen))
            out.append(f'#line {n + 1} "{name}"\n')
    return "".join(out)


def render(stem: str, params: dict) -> str:
    """Full source of kernel family `stem` (cuda_src/<stem>.cu + codegen/<stem>.j2) for `params`."""
    cu = cuda_src_dir() / f"{stem}.cu"
    header_section, kernel = split(cu.read_text(), str(cu))
    header = _environment().get_template(f"{stem}.j2").render(**params)
    seen: set[Path] = set()
    # Headers included by the rendered header and by the kernel are inlined once, in order.
    return (_inline(header, f"{stem}.j2", 1, cuda_src_dir(), seen)
            + _inline(kernel, f"{stem}.cu", header_section.count("\n") + 2, cuda_src_dir(), seen))
