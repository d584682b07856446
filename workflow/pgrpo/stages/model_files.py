"""A model's own files as the stages read them before any job runs (``pgrpo plan``, ``pgrpo doctor``): its
``config.json`` from a local ``path`` or the Hugging Face cache, never downloaded.
"""

from __future__ import annotations

import json
from pathlib import Path


def model_config_json(spec: dict) -> dict | None:
    """The model's config.json from its local path or the hub cache (never downloaded); None when neither has it."""
    if spec.get("path") and (Path(spec["path"]) / "config.json").is_file():
        return json.loads((Path(spec["path"]) / "config.json").read_text())
    if spec.get("id"):
        try:
            from huggingface_hub import try_to_load_from_cache

            found = try_to_load_from_cache(spec["id"], "config.json", revision=spec.get("revision"))
        except Exception:  # noqa: BLE001 (an odd id: not cached)
            found = None
        if isinstance(found, str):
            return json.loads(Path(found).read_text())
    return None
