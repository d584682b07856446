"""Stage ``prefetch`` (``pgrpo prefetch``, rule prefetch): on the login node, which has network, fetch every model and
dataset the GPU jobs load by hub id into the Hugging Face cache (``cluster.hf_home``), so that the compute nodes run
with ``HF_HUB_OFFLINE=1`` (Section 4's grid on an offline cluster; issue 19, item 7).

- a model by hub id: ``huggingface_hub.snapshot_download`` (its weights, tokenizer and config.json: what
  ``from_pretrained`` and vLLM read offline from the hub cache);
- a dataset of ``data`` (the training and in-training evaluation sets, GSM8K in the paper) by hub id:
  :func:`pgrpo.grpo.data.load_table`, the very call the training job makes, so that its prepared table is in
  ``datasets``' cache and the job's offline ``load_dataset`` reuses it;
- a local ``path`` (a model built by the workflow, a local copy): nothing to fetch, recorded with whether it exists.

The benchmarks are not fetched here: rule prepare_benchmark runs on the login node when ``cluster.offline`` is set
(it streams only the split it samples, where fetching would download every split, and ``datasets`` cannot stream from
its cache offline), and the evaluation jobs read only its prepared file.

The manifest (``results/prefetch/manifest.json``, every offline GPU job's input) lists each item: what it is, where
it came from and where it is in the cache. Any hub item that cannot be fetched fails the stage with one line naming
its config key (an :class:`InputError`), after every item was tried.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from pgrpo.atomic import write_json
from pgrpo.errors import InputError

#: Files of a model repository no job reads (other formats of the same weights).
MODEL_IGNORE_PATTERNS: tuple[str, ...] = ("*.gguf", "*.onnx", "*.msgpack", "*.h5", "*.ot", "original/*", "onnx/*")

MANIFEST_VERSION = 1


def prefetch_items(config: dict) -> list[dict]:
    """Every model and ``data`` dataset of a config, as the items the stage fetches (the K_ref sweep's model is one of
    ``models``)."""
    items = []
    for name, spec in config["models"].items():
        items.append({"kind": "model", "key": f"models.{name}", "id": spec.get("id"), "path": spec.get("path"),
                      "revision": spec.get("revision")})
    for role, spec in (config.get("data") or {}).items():
        if spec:
            items.append({"kind": "dataset", "key": f"data.{role}", "id": spec.get("id"), "path": spec.get("path"),
                          "config": spec.get("config"), "split": spec.get("split") or "train"})
    return items


def hf_home() -> str:
    """The Hugging Face cache this process uses (HF_HOME, or huggingface_hub's default)."""
    from huggingface_hub import constants

    return str(Path(os.environ.get("HF_HOME") or constants.HF_HOME).resolve())


def fetch_model(item: dict) -> dict:
    """Download a model repository into the hub cache; its snapshot folder, files and bytes."""
    from huggingface_hub import snapshot_download

    folder = Path(snapshot_download(repo_id=item["id"], revision=item.get("revision"),
                                    ignore_patterns=list(MODEL_IGNORE_PATTERNS)))
    files = [p for p in folder.rglob("*") if p.is_file()]
    return {"snapshot": str(folder), "files": len(files), "bytes": sum(p.stat().st_size for p in files)}


def fetch_dataset(item: dict) -> dict:
    """Load a dataset split online as the training job does (:func:`pgrpo.grpo.data.load_table`): its rows and the
    cache files of the prepared table."""
    from pgrpo.grpo.data import load_table

    table, source = load_table({k: item.get(k) for k in ("id", "path", "config", "split")}, item["key"])
    files = [entry["filename"] for entry in getattr(table, "cache_files", None) or []]
    return {"loaded_from": source, "rows": len(table), "cache_files": files}


def run_prefetch(items: list[dict], manifest: str, *, fetch_model: Callable[[dict], dict] = fetch_model,
                 fetch_dataset: Callable[[dict], dict] = fetch_dataset) -> dict:
    """Fetch every hub item (a local path is checked, not fetched), write the manifest, return it."""
    records, failures = [], []
    for item in items:
        record = {k: v for k, v in item.items() if v is not None}
        if item.get("path"):
            record.update(source="path", present=Path(item["path"]).exists())
        elif not item.get("id"):
            failures.append(f"{item['key']}: neither path nor id")
            continue
        else:
            fetch = fetch_model if item["kind"] == "model" else fetch_dataset
            try:
                record.update(source="hub", present=True, **fetch(item))
            except Exception as error:  # noqa: BLE001 (a network, auth or name problem: named, then the rest)
                message = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
                failures.append(f"{item['key']}.id {item['id']!r}: {message}")
                continue
        records.append(record)
        print(f"{record['key']}: {record.get('snapshot') or record.get('source')}"
              + ("" if record["present"] else " (not there yet: built by the workflow)"))
    if failures:
        raise InputError("pgrpo prefetch: could not fetch " + "; ".join(failures)
                         + " (run it on a node with network: the login node)")
    result = {"version": MANIFEST_VERSION, "hf_home": hf_home(), "items": records}
    write_json(manifest, result)
    return result
