"""``pgrpo evaluate-checkpoint`` and ``pgrpo join-evaluations``: the held-out evaluation of a run as jobs of its own
(``training.eval_mode: checkpoints``, :mod:`pgrpo.stages.eval_checkpoints`)."""

from __future__ import annotations

from pgrpo.stages.commands import WORKFLOW_STAGES, Commands, add_model_args, json_sections, model_and_config


def add_commands(commands: Commands) -> None:
    p = commands.add("evaluate-checkpoint", WORKFLOW_STAGES, "the held-out evaluation of one run at one step, from "
                                                             "its saved adapter (eval_mode: checkpoints)",
                     _evaluate_checkpoint)
    add_model_args(p, "model spec as JSON {name, id, path} (how the rule calls it)")
    p.add_argument("--data-json", help="the data section as JSON")
    p.add_argument("--training-json", help="the training section as JSON")
    p.add_argument("--bookkeeping-file", help="JSON file of the training section's bookkeeping keys")
    p.add_argument("--G", type=int, required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--run-dir", required=True, help="the run's folder (its eval_adapters/step-N)")
    p.add_argument("--step", type=int, required=True, help="the optimizer step to evaluate")
    p.add_argument("--json", required=True, help="write the evaluation row here")

    p = commands.add("join-evaluations", WORKFLOW_STAGES, "a run's log.csv from its train_log.csv and its "
                                                          "evaluation jobs' rows", _join_evaluations)
    p.add_argument("--train-log", required=True)
    p.add_argument("--evals", nargs="*", default=[], help="one evaluation JSON per evaluation step")
    p.add_argument("--training-json", help="the training section as JSON (eval_steps, eval_on_start)")
    p.add_argument("--csv", required=True, help="the joined log.csv")


def _training(args) -> tuple[dict, dict]:
    data, training = json_sections(args, "--data-json", "--training-json")
    if args.bookkeeping_file:
        from pgrpo.atomic import read_json

        training = {**training, **read_json(args.bookkeeping_file, "--bookkeeping-file")}
    return data, training


def _evaluate_checkpoint(args):
    from pgrpo.stages.eval_checkpoints import run_evaluate_checkpoint

    model, config = model_and_config(args)
    data, training = _training(args) if config is None else (config["data"], config["training"])
    row = run_evaluate_checkpoint(model=model, data=data, training=training, G=args.G, seed=args.seed,
                                  run_dir=args.run_dir, step=args.step, out_json=args.json)
    print(f"pgrpo evaluate-checkpoint: step {row['step']}: eval_accuracy {row.get('eval_accuracy')}")


def _join_evaluations(args):
    from pgrpo.stages.eval_checkpoints import run_join_evaluations

    (training,) = json_sections(args, "--training-json")
    run_join_evaluations(train_log=args.train_log, eval_jsons=args.evals, training=training, out_csv=args.csv)
