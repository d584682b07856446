"""The per-step log of Section 4.2 (columns, rows) and resumption: the run fingerprint that a checkpoint must
match, the durable partial log, the last complete checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import zipfile
from pathlib import Path

from pgrpo.atomic import atomic_path, write_json
from pgrpo.grpo.training_config import trajectory_section

LOG_COLUMNS = [
    "step",
    "reward",
    "reward_std",
    "frac_reward_zero_std",
    "entropy",
    "kl",
    "grad_norm",
    "importance_sampling_ratio_max",
    "eval_reward",
    "eval_accuracy",
    "importance_sampling_ratio_seq_max",
    "vllm_importance_sampling_ratio_max",
    "learning_rate",
    "completion_length",
    "epoch",
    "loss",
    "clip_ratio",
    "step_time",
    "eval_completion_length",
    "effective_learning_rate",
]


# TRL / transformers log key -> log.csv column, for the per-step (train) logs.
TRAIN_METRIC_COLUMNS = {
    "reward": "reward",
    "reward_std": "reward_std",
    "frac_reward_zero_std": "frac_reward_zero_std",
    "entropy": "entropy",
    "kl": "kl",
    "grad_norm": "grad_norm",
    "importance_sampling_ratio_max": "importance_sampling_ratio_max",
    "importance_sampling_ratio_seq_max": "importance_sampling_ratio_seq_max",
    "sampling/importance_sampling_ratio/max": "vllm_importance_sampling_ratio_max",
    "learning_rate": "learning_rate",
    "completions/mean_length": "completion_length",
    "epoch": "epoch",
    "loss": "loss",
    "clip_ratio/region_mean": "clip_ratio",
    "step_time": "step_time",
    "effective_learning_rate": "effective_learning_rate",  # the map (3)'s eta (pgrpo.grpo.effective_step)
}


CHECKPOINT_DIRNAME = "checkpoints"


PARTIAL_LOG_NAME = "steps.partial.jsonl"


RUN_SPEC_NAME = "run_spec.json"




def run_spec_fingerprint(model_name: str, training: dict, G: int, seed: int, extra: dict | None = None) -> dict:
    """What determines the trajectory; checkpoints made under another spec are not resumed."""
    relevant = trajectory_section(training)
    spec = {"model": model_name, "G": G, "seed": seed, "training": relevant, **(extra or {})}
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()
    return {"sha256": digest, "spec": spec}


def distributed_spec(state) -> dict:
    """The launch a checkpoint belongs to: the world size (it sets the generation batch) and the sharding (the
    DeepSpeed ZeRO stage sets the optimizer-state format); ``state`` is accelerate's ``PartialState``."""
    kind = getattr(state.distributed_type, "value", str(state.distributed_type))
    zero_stage = os.environ.get("ACCELERATE_DEEPSPEED_ZERO_STAGE") if kind == "DEEPSPEED" else None
    return {"world_size": int(state.num_processes), "distributed_type": kind, "zero_stage": zero_stage}


def dataset_digest(dataset) -> str:
    """sha256 of a dataset's rows (prompt, answer, ...), so changed data is never resumed from old checkpoints."""
    digest = hashlib.sha256()
    for row in dataset:
        digest.update(json.dumps(row, sort_keys=True, default=str).encode())
    return digest.hexdigest()


def model_stamp(model: dict) -> dict:
    """Identity of the base weights: hub id, or the local files' names, sizes and modification times."""
    path = model.get("path")
    if not path:
        return {"id": model.get("id"), "revision": model.get("revision")}
    files = sorted(p for p in Path(path).rglob("*") if p.is_file())
    return {
        "path": str(path),
        "files": [[str(p.relative_to(path)), p.stat().st_size, p.stat().st_mtime_ns] for p in files],
    }


def read_partial_log(path: Path) -> list[dict]:
    """Rows of the partial JSONL; a torn last line (kill mid-write) is ignored."""
    rows: list[dict] = []
    if not path.exists():
        return rows
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and "step" in row and "kind" in row:
            rows.append(row)
    return rows


def truncate_partial_log(path: Path, last_step: int) -> None:
    """Keep only rows with ``step <= last_step`` (the resumed checkpoint), rewritten atomically."""
    rows = [row for row in read_partial_log(path) if row["step"] <= last_step]
    with atomic_path(path) as tmp:
        tmp.write_text("".join(json.dumps(row) + "\n" for row in rows))


def assemble_log(rows: list[dict], last_step: int):
    """The final ``log.csv`` frame: train rows 1..last_step, each exactly once, with eval rows merged in; an eval
    before the first update (``eval_on_start``) is a row of its own at step 0, with no train columns."""
    import pandas as pd

    train = [r for r in rows if r["kind"] == "train"]
    steps = [r["step"] for r in train]
    if sorted(steps) != list(range(1, last_step + 1)):
        missing = sorted(set(range(1, last_step + 1)) - set(steps))
        duplicated = sorted({s for s in steps if steps.count(s) > 1})
        raise RuntimeError(
            f"per-step log is not steps 1..{last_step} once each (missing {missing[:5]}, duplicated {duplicated[:5]})"
        )
    frame = pd.DataFrame([{k: v for k, v in r.items() if k != "kind"} for r in train]).set_index("step")
    evals = {}
    for r in rows:
        if r["kind"] == "eval":
            evals[r["step"]] = {k: v for k, v in r.items() if k not in ("kind", "step")}  # last one wins
    if evals:
        frame = frame.join(pd.DataFrame.from_dict(evals, orient="index"), how="left")
        if 0 in evals:
            frame = pd.concat([pd.DataFrame([evals[0]], index=[0]), frame])
    frame = frame.reindex(columns=[c for c in LOG_COLUMNS if c != "step"])
    frame.index.name = "step"
    return frame.sort_index().reset_index()


def last_complete_checkpoint(checkpoint_dir: Path) -> tuple[Path, int] | None:
    """The newest ``checkpoint-N`` whose ``trainer_state.json`` (written last by the main process) parses and whose
    every process's RNG state is whole (:func:`rng_states_whole`): in a multi-process launch each rank writes its
    own ``rng_state_<rank>.pth`` and nothing makes the main process wait for the others before it writes
    ``trainer_state.json``, so a run killed in between left a checkpoint whose resume would restart a rank's RNG
    (seen as a resumed ZeRO-3 run diverging from the uninterrupted one)."""
    if not checkpoint_dir.is_dir():
        return None
    world_size = spec_world_size(checkpoint_dir)
    found = []
    for child in checkpoint_dir.iterdir():
        if child.is_dir() and child.name.startswith("checkpoint-") and child.name[len("checkpoint-") :].isdigit():
            try:
                state = json.loads((child / "trainer_state.json").read_text())
                step = int(state["global_step"])
            except (OSError, ValueError, KeyError, TypeError):
                continue
            if rng_states_whole(child, world_size):
                found.append((step, child))
    if not found:
        return None
    step, path = max(found)
    return path, step


def spec_world_size(checkpoint_dir: Path) -> int | None:
    """The world size the run's spec (``run_spec.json``, :func:`distributed_spec`) records; None where none does."""
    try:
        return int(json.loads((checkpoint_dir / RUN_SPEC_NAME).read_text())["spec"]["distributed"]["world_size"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def rng_states_whole(checkpoint: Path, world_size: int | None) -> bool:
    """Whether a checkpoint's RNG state files are whole zip archives (``torch.save``'s format; a file cut short has
    no central directory): ``rng_state.pth`` for one process, ``rng_state_<rank>.pth`` for each of ``world_size``;
    where the world size is not known, those present."""
    if world_size is None:
        names = sorted(path.name for path in checkpoint.glob("rng_state*.pth"))
    elif world_size <= 1:
        names = ["rng_state.pth"]
    else:
        names = [f"rng_state_{rank}.pth" for rank in range(world_size)]
    for name in names:
        try:
            with zipfile.ZipFile(checkpoint / name) as archive:
                if archive.testzip() is not None:
                    return False
        except (OSError, zipfile.BadZipFile):
            return False
    return True


def prepare_checkpoint_dir(checkpoint_dir: Path, fingerprint: dict) -> tuple[str | None, int]:
    """Resume point (path, step) for this run spec; stale or torn state is set aside, never silently reused."""
    spec_path = checkpoint_dir / RUN_SPEC_NAME
    if checkpoint_dir.exists():
        try:
            previous = json.loads(spec_path.read_text())["sha256"]
        except (OSError, ValueError, KeyError, TypeError):
            previous = None
        if previous != fingerprint["sha256"]:
            if any(checkpoint_dir.iterdir()):
                stale = checkpoint_dir.with_name(checkpoint_dir.name + ".stale")
                shutil.rmtree(stale, ignore_errors=True)
                os.replace(checkpoint_dir, stale)
                print(f"pgrpo train: checkpoints from another configuration moved to {stale}", file=sys.stderr)
            else:
                checkpoint_dir.rmdir()
    checkpoint_dir.mkdir(parents=True, exist_ok=True)
    write_json(spec_path, fingerprint)
    partial = checkpoint_dir / PARTIAL_LOG_NAME
    resume = last_complete_checkpoint(checkpoint_dir)
    if resume is None:
        partial.unlink(missing_ok=True)
        return None, 0
    path, step = resume
    for child in checkpoint_dir.iterdir():  # torn checkpoints newer than the resume point
        if child.is_dir() and child.name.startswith("checkpoint-") and child.name[11:].isdigit():
            if int(child.name[11:]) > step:
                shutil.rmtree(child)
    truncate_partial_log(partial, step)
    return str(path), step
