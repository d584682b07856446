"""The one error type for a user's mistake: bad config, missing file, missing column.

The CLI catches :class:`InputError` and prints its message as a single line (no traceback), then exits 2.
Raise it *before* any work starts, with a message that names the offending key, file or column.
"""


class InputError(ValueError):
    """A user's input is wrong; the message names what (config key, file path, column) and why."""


def one_line(exc: BaseException, limit: int = 200) -> str:
    """An exception's message on one line, at most ``limit`` characters (for messages that quote a library error)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."
