"""Atomic output writing (a file appears complete or not at all), and reading the JSON files stages pass on.

Every output of the workflow goes through these helpers, so a killed job never leaves a half-written file
that looks finished. Each writes to a temporary sibling and renames it over the target (``os.replace`` is
atomic on POSIX within one filesystem).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _current_umask()


@contextmanager
def atomic_path(target: str | os.PathLike, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path beside ``target``; on success rename it to ``target``, on error remove it.

    ``suffix`` lets writers that infer the format from the extension (matplotlib, pandas) see the right one.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix or target.suffix, dir=target.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    os.chmod(tmp_path, 0o666 & ~_UMASK)  # mkstemp makes 0600 files; outputs get the usual permissions
    try:
        yield tmp_path
        os.replace(tmp_path, target)
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise


@contextmanager
def atomic_dir(target: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary directory beside ``target``; on success it replaces ``target`` whole."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    os.chmod(tmp, 0o777 & ~_UMASK)
    try:
        yield tmp
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_text(target: str | os.PathLike, text: str) -> None:
    with atomic_path(target) as tmp:
        tmp.write_text(text)


def write_json(target: str | os.PathLike, obj: Any) -> None:
    write_text(target, json.dumps(obj, indent=2, sort_keys=False, default=_json_default) + "\n")


def write_csv(target: str | os.PathLike, frame) -> None:
    """Write a pandas DataFrame as CSV without its index."""
    with atomic_path(target) as tmp:
        frame.to_csv(tmp, index=False)


def save_figure(fig, target: str | os.PathLike, **kwargs) -> None:
    """Save a matplotlib figure atomically (format from the target's extension)."""
    with atomic_path(target) as tmp:
        fig.savefig(tmp, **kwargs)


def _json_default(obj: Any):
    # numpy scalars and arrays, paths
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def read_json(path: str | os.PathLike, what: str) -> dict[str, Any]:
    """A JSON object written by an earlier stage; an InputError names ``what`` and the file if it is missing,
    unreadable or not an object."""
    from pgrpo.errors import InputError

    file = Path(path)
    if not file.is_file():
        raise InputError(f"{what} not found: {path}")
    try:
        data = json.loads(file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise InputError(f"{what} {path} is not valid JSON: {error}") from None
    if not isinstance(data, dict):
        raise InputError(f"{what} {path} is not a JSON object")
    return data
