"""``pgrpo train``: GRPO (TRL + LoRA) for one (model, G, seed), or one run of the K_ref sweep
(:mod:`pgrpo.stages.train`)."""

from __future__ import annotations

from pgrpo.errors import InputError
from pgrpo.stages.commands import (
    WORKFLOW_STAGES,
    Commands,
    add_model_args,
    json_arg,
    json_sections,
    model_and_config,
)


def add_commands(commands: Commands) -> None:
    p = commands.add("train", WORKFLOW_STAGES, "GRPO (TRL + LoRA) for one (model, G, seed), logged at every step",
                     _train)
    add_model_args(p, "model spec as JSON {name, id, path} (how the rule calls it)")
    p.add_argument("--data-json", help="the data section as JSON")
    p.add_argument("--training-json", help="the training section as JSON")
    p.add_argument("--bookkeeping-file", help="JSON file of the training section's bookkeeping keys (checkpoints, "
                                              "trackers, resources), merged into --training-json")
    p.add_argument("--G", type=int, required=True, help="group size (completions per prompt)")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--out-dir", required=True)
    p.add_argument("--kref-sweep-json", help="the kref_sweep section as JSON: train one run of the K_ref sweep")
    p.add_argument("--eta", type=float, help="with --kref-sweep-json: the run's learning rate")
    p.add_argument("--k-ref", type=int, help="with --kref-sweep-json: the run's refresh interval K_ref")


def _train(args):
    model, config = model_and_config(args)
    data, training = (json_sections(args, "--data-json", "--training-json") if config is None
                      else (config["data"], config["training"]))
    if args.bookkeeping_file:
        from pgrpo.atomic import read_json

        training = {**training, **read_json(args.bookkeeping_file, "--bookkeeping-file")}
    from pgrpo.stages import train

    if args.kref_sweep_json:
        from pgrpo.stages.kref_sweep import sweep_training

        if args.eta is None or args.k_ref is None:
            raise InputError("--kref-sweep-json needs --eta and --k-ref")
        training = sweep_training(training, json_arg(args.kref_sweep_json, "--kref-sweep-json"), args.eta,
                                  args.k_ref)
    train.run_train(model=model, data=data, training=training, G=args.G, seed=args.seed, out_dir=args.out_dir)
    from pgrpo.grpo.trainer import leave_if_worker_rank

    leave_if_worker_rank()  # a worker of a multi-process launch: done, and its teardown skipped
