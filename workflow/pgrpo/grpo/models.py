"""Loading a model and tokenizer by Hugging Face id or local path (a path overrides the id: offline clusters),
and the warm-start record of the embedded tiny model.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pgrpo.errors import InputError


def load_model_and_tokenizer(model_spec: dict, dtype: Any = None):
    """Load ``(model, tokenizer)`` for ``model_spec`` = {name, id, path}: a set ``path`` overrides ``id``.

    A missing path or a directory without ``config.json`` raises InputError naming ``models.<name>.path``; a hub id
    that cannot be loaded (e.g. HF_HUB_OFFLINE=1 and not cached) raises InputError naming ``models.<name>.id``. The
    tokenizer gets ``pad_token = eos_token`` when it has none.
    """
    name = model_spec.get("name") or "?"
    path, hub_id = model_spec.get("path"), model_spec.get("id")
    if path:
        p = Path(path)
        if not p.is_dir():
            raise InputError(f"models.{name}.path: no such model directory: {path}")
        if not (p / "config.json").is_file():
            raise InputError(f"models.{name}.path: {path} has no config.json (not a saved model)")
        source, key = str(p), "path"
    elif hub_id:
        source, key = hub_id, "id"
    else:
        raise InputError(f"models.{name}: set either 'path' (a local model directory) or 'id' (a hub model id)")

    from transformers import AutoModelForCausalLM, AutoTokenizer

    kwargs: dict[str, Any] = {}
    if dtype is not None:
        kwargs["dtype"] = dtype
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
        model = AutoModelForCausalLM.from_pretrained(source, **kwargs)
    except Exception as exc:
        offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False")
        hint = " (HF_HUB_OFFLINE is set and it is not cached)" if offline and key == "id" else ""
        msg = " ".join(str(exc).split())[:200]
        extra = f"; set models.{name}.path to a local copy" if key == "id" else ""
        raise InputError(f"models.{name}.{key}: cannot load {source!r}{hint}: {msg}{extra}") from None
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


def read_warmstart(model_dir: str) -> dict:
    """The ``warmstart.json`` record of a built tiny model."""
    return json.loads((Path(model_dir) / "warmstart.json").read_text())
