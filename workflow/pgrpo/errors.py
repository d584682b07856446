"""The one error type for a user's mistake: bad config, missing file, missing column.

The CLI catches :class:`InputError` and prints its message as a single line (no traceback), then exits 2.
Raise it *before* any work starts, with a message that names the offending key, file or column.
"""

import math


class InputError(ValueError):
    """A user's input is wrong; the message names what (config key, file path, column) and why."""


def one_line(exc: BaseException, limit: int = 200) -> str:
    """An exception's message on one line, at most ``limit`` characters (for messages that quote a library error)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def range_bounds(value, where: str, *, null_ok: bool = False, text_ok: bool = False) -> tuple[float, float] | None:
    """A declared range (a reward's, a reward function's) as ``(lo, hi)`` floats: two finite numbers with LO < HI
    (numbers given as text too where ``text_ok``, as a command line gives them; None passes where ``null_ok``).
    Anything else is an :class:`InputError` that starts with ``where`` (the key, file or option) and quotes the
    value."""
    if value is None and null_ok:
        return None
    wanted = ("null or " if null_ok else "") + "two finite numbers LO < HI"

    def number(item) -> float:
        if isinstance(item, bool) or not isinstance(item, (int, float, str) if text_ok else (int, float)):
            raise ValueError(item)
        return float(item)

    try:
        if isinstance(value, (str, bytes)) or len(value) != 2:
            raise ValueError(value)
        lo, hi = number(value[0]), number(value[1])
    except (TypeError, ValueError, LookupError):
        raise InputError(f"{where}: must be {wanted}, got {value!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise InputError(f"{where}: must be {wanted}, got {value!r}")
    return lo, hi
