"""Stage ``train`` per (model, G, seed): check the specs, load model and data, run :mod:`pgrpo.grpo.trainer`, write
``log.csv``, ``meta.json`` and ``merged/``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from pgrpo.errors import InputError
from pgrpo.grpo.chat import add_stop_tokens, any_chat
from pgrpo.grpo.checkpoints import CHECKPOINT_DIRNAME, model_stamp
from pgrpo.grpo.time_limit import install_checkpoint_signal
from pgrpo.grpo.trainer import check_dataset, guard_reward, preflight_reward, train_grpo
from pgrpo.grpo.training_config import build_grpo_config, resolve_training, validate_training


def check_model_spec(model: dict) -> None:
    """A model is named by a local ``path`` (must exist; overrides ``id``) or a hub ``id``."""
    name = model.get("name") or "?"
    if model.get("path"):
        if not Path(model["path"]).exists():
            raise InputError(f"models.{name}.path: no such model directory: {model['path']}")
    elif not model.get("id"):
        raise InputError(f"models.{name}: set either 'path' (a local model directory) or 'id' (a hub model id)")


def run_train(model: dict, data: dict, training: dict, G: int, seed: int, out_dir: str) -> None:
    """GRPO for one (model, G, seed): writes ``out_dir/log.csv``, ``meta.json``, ``merged/``; keeps checkpoints.

    ``model`` = {name, id, path, ...} (path overrides id), ``data`` = the ``data:`` section (train/eval specs),
    ``training`` = the ``training:`` section (:data:`TRAINING_DEFAULTS`). A re-run resumes from the last checkpoint.
    With a chat template (``data.*.chat_template``) generation stops at the template's end-of-turn token: it is
    added to the model's generation config (what TRL stops at and masks by, and what the merged model saves).
    """
    install_checkpoint_signal()  # outside `python -m pgrpo` (which installs it first): a signal while loading exits 75
    import torch

    from pgrpo.grpo import data as data_module
    from pgrpo.grpo import rewards
    from pgrpo.grpo.models import load_model_and_tokenizer

    cuda = torch.cuda.is_available()
    resolved = validate_training(
        resolve_training(training), G, num_processes=int(os.environ.get("WORLD_SIZE", "1")), cuda=cuda,
        bf16_supported=bool(cuda and torch.cuda.is_bf16_supported()),
    )
    torch.set_num_threads(resolved["resources"]["threads"])
    name = model.get("name") or "model"
    check_model_spec(model)
    data = data or {}
    if not data.get("train"):
        raise InputError("data.train: missing (the GRPO training set)")
    want_eval = bool(data.get("eval")) and bool(resolved["eval_steps"])
    dtype = torch.bfloat16 if (cuda and resolved["bf16"]) else torch.float32

    def load_datasets(tokenizer):
        train_set = data_module.load_problems(data["train"], "train", tokenizer)
        eval_set = data_module.load_problems(data["eval"], "eval", tokenizer) if want_eval else None
        check_dataset(train_set, "train")
        if eval_set is not None:
            check_dataset(eval_set, "eval")
        preflight_reward(guard_reward(rewards.accuracy_reward), train_set)
        return train_set, eval_set

    uses_chat = any_chat((spec or {}).get("chat_template") for spec in (data["train"], data.get("eval")))
    if not uses_chat:  # data and reward errors surface before the (possibly large) model is loaded
        train_set, eval_set = load_datasets(None)
    # Under `accelerate launch` with DeepSpeed ZeRO-3, the training arguments must exist before from_pretrained so
    # that the weights are loaded already partitioned (transformers' zero.Init hook); harmless otherwise.
    zero3_hook = build_grpo_config(
        resolved, G, seed, str(Path(out_dir) / CHECKPOINT_DIRNAME), has_eval=want_eval, cuda=cuda
    )
    policy, tokenizer = load_model_and_tokenizer(model, dtype=dtype)
    del zero3_hook
    if uses_chat:
        train_set, eval_set = load_datasets(tokenizer)
    chat = isinstance(train_set[0]["prompt"], list)  # conversational rows: TRL renders them with the template
    stops = add_stop_tokens(policy, tokenizer, chat)

    def load_base_model():
        base = load_model_and_tokenizer(model, dtype=dtype)[0]
        add_stop_tokens(base, tokenizer, chat)  # the merged model stops where the trained one did
        return base

    train_grpo(
        model=policy,
        tokenizer=tokenizer,
        train_dataset=train_set,
        eval_dataset=eval_set,
        reward_funcs=[rewards.accuracy_reward],
        training=resolved,
        G=G,
        seed=seed,
        out_dir=out_dir,
        model_name=name,
        load_base_model=load_base_model,
        provenance={"model": model_stamp(model), "data": data},
        stop_token_ids=stops,
    )


def main(argv: list[str] | None = None) -> int:
    """``python -m pgrpo.stages.train`` with the options of ``pgrpo train``."""
    parser = argparse.ArgumentParser(prog="python -m pgrpo.stages.train", description=run_train.__doc__)
    parser.add_argument("--model-json", required=True)
    parser.add_argument("--data-json", required=True)
    parser.add_argument("--training-json", required=True)
    parser.add_argument("--G", type=int, required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--out-dir", required=True)
    options = parser.parse_args(argv)
    try:
        run_train(
            model=json.loads(options.model_json),
            data=json.loads(options.data_json),
            training=json.loads(options.training_json),
            G=options.G,
            seed=options.seed,
            out_dir=options.out_dir,
        )
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
