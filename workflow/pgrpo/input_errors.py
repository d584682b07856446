"""Exit 2 is never retried (issue 19, item 8): a verb that exits 2 (a bad input: :class:`pgrpo.errors.InputError`, a
missing file, bad arguments) leaves a marker keyed by its arguments, and the same command run again (the scheduler's
retry of the same job) exits 2 at once with the first attempt's message, instead of spending its resources on the
same failure. Active only where the workflow sets :data:`ENV` (every rule's shell, ``workflow/rules/common.smk``);
a fresh ``snakemake`` run clears the markers (you fixed the input). The GPU jobs' shell guard does the same before
``pgrpo doctor``. Standard library only: this runs before any verb imports anything.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Sequence

ENV = "PGRPO_INPUT_ERRORS"


def marker_path(argv: Sequence[str]) -> Path | None:
    """Where the marker of this command (its working directory and arguments) lives; None when not enabled."""
    folder = os.environ.get(ENV)
    if not folder:
        return None
    key = hashlib.sha256(json.dumps([os.getcwd(), list(argv)]).encode()).hexdigest()[:24]
    verb = next((a for a in argv if not a.startswith("-")), "pgrpo")
    return Path(folder) / f"{verb}-{key}"


def earlier_failure(argv: Sequence[str]) -> str | None:
    """The message of an earlier attempt of this very command that exited 2, or None."""
    marker = marker_path(argv)
    if marker is None or not marker.is_file():
        return None
    return marker.read_text(errors="replace").strip()


def record_failure(argv: Sequence[str], message: str) -> None:
    """Leave the marker of an exit 2 (written whole: a temporary file renamed into place)."""
    marker = marker_path(argv)
    if marker is None:
        return
    marker.parent.mkdir(parents=True, exist_ok=True)
    tmp = marker.with_name(f".{marker.name}.tmp")
    tmp.write_text(message.strip() + "\n")
    os.replace(tmp, marker)
