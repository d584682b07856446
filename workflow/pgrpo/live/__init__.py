"""Inside the run: the failure modes of Section 5 (Figures 2-5) and the forecast of Section 4.4 on a run in progress,
with Theorem 7 (Eq. 9-11) read against its configuration. :mod:`.reads` is the pure reading logic (no transformers),
:mod:`.page` builds ``live.json``/``live.html``, :mod:`.callback` holds :class:`DynamicsCallback` (a
``transformers.TrainerCallback``, imported on first use so that the rest works without transformers)."""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["DynamicsCallback"]


def __getattr__(name: str) -> Any:
    if name == "DynamicsCallback":
        # PEP 562: loaded on first use only, so that importing pgrpo.live.reads (the benchmark, the pages, replay)
        # never imports transformers; importlib keeps that import out of the package's own import list
        return importlib.import_module("pgrpo.live.callback").DynamicsCallback
    raise AttributeError(f"module 'pgrpo.live' has no attribute {name!r}")
