"""Stage ``aggregate_seeds`` (Section 4.2): read each seed's ``log.csv``, check they are one run group, write the
per-step mean, s.d. and count.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Sequence

import pandas as pd

from pgrpo.errors import InputError
from pgrpo.grpo.run_log import RUN_DIR, aggregate_seeds
from pgrpo.stages.logs import read_run_log


def load_log(path: str | Path) -> pd.DataFrame:
    """Read a per-step log in any saved format (:func:`pgrpo.stages.logs.read_run_log`). A workflow run's own
    infinities (an importance-sampling ratio that overflowed) are values to aggregate and plot, not a broken file:
    they are read as missing, and listed in ``frame.attrs["non_finite"]``."""
    return read_run_log(path, allow_non_finite=True)


def _check_same_run_group(log_csvs: Sequence[str]) -> None:
    """The logs must be seeds of one (model, G): from their paths, and from a ``meta.json`` beside each if present."""
    identities = set()
    for path in log_csvs:
        identity = None
        meta_path = Path(path).parent / "meta.json"
        if meta_path.is_file():
            try:
                meta = json.loads(meta_path.read_text())
                identity = (meta.get("model"), meta.get("G"))
            except json.JSONDecodeError:
                identity = None
        if identity is None or None in identity:
            match = RUN_DIR.search(Path(path).resolve().as_posix())
            identity = (match["model"], int(match["G"])) if match else None
        if identity is not None:
            identities.add((str(identity[0]), int(identity[1])))
    if len(identities) > 1:
        listed = ", ".join(f"{m} G={G}" for m, G in sorted(identities))
        raise InputError(f"logs of different runs given to one aggregate ({listed}); aggregate one (model, G) at a time")


def run_aggregate(log_csvs: Sequence[str], out_csv: str, min_seeds: int = 1) -> pd.DataFrame:
    """Aggregate the seeds' logs of one (model, G) into ``out_csv`` (``step`` + ``<col>_mean/_sd/_n`` per column).

    Raises InputError for a missing or unreadable log, a log without a step column, a repeated path, or logs of
    different (model, G). Warns on stderr when the seeds cover different steps. Returns the written frame.
    """
    from pgrpo.atomic import write_csv

    paths = [str(p) for p in log_csvs]
    if not paths:
        raise InputError("no log.csv given to aggregate")
    if len(set(paths)) != len(paths):
        raise InputError(f"a log is listed twice: {sorted(p for p in paths if paths.count(p) > 1)[0]}")
    if isinstance(min_seeds, bool) or not isinstance(min_seeds, int) or min_seeds < 1:
        raise InputError(f"min_seeds must be an integer >= 1, got {min_seeds!r}")
    _check_same_run_group(paths)
    logs = [load_log(path) for path in paths]
    step_sets = [set(log["step"]) for log in logs]
    union = set().union(*step_sets)
    for path, steps in zip(paths, step_sets):
        if steps != union:
            missing = len(union - steps)
            print(f"aggregate: {path} lacks {missing} of {len(union)} steps; those steps average the other seeds",
                  file=sys.stderr)
    frame = aggregate_seeds(logs, min_seeds=min_seeds)
    write_csv(out_csv, frame)
    return frame
