"""Exceptions gn_mm raises (each also derives from the builtin a caller would expect), and the integer check its
options share."""

import operator


class GnMmError(Exception):
    """Base class of every gn_mm error."""


class UnsupportedError(GnMmError, ValueError):
    """A dtype, accumulator, output or option combination that no kernel implements."""


class LayoutError(GnMmError, ValueError):
    """A shape, stride or alignment the kernels cannot read."""


class ArchError(GnMmError, RuntimeError):
    """The GPU is too old (or not a CUDA GPU) for the requested variant."""


class CompileError(GnMmError, RuntimeError):
    """NVRTC rejected a rendered kernel. Carries the compiler log and the path of the dumped source."""

    def __init__(self, message: str, log: str, source_path: str | None):
        where = source_path or "not dumped (the dump directory cannot be written)"
        super().__init__(f"{message}\nsource: {where}\n{log}")
        self.log = log
        self.source_path = source_path


def as_int(value) -> int | None:
    """`value` as a Python int when it is an integer (int, numpy integer; bool excluded), else None: a float or
    string would pass range checks here and fail later inside struct packing or torch."""
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None
