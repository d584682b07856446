"""The verb ``pgrpo doctor``: can this node run the config's GPU jobs? (:mod:`pgrpo.stages.doctor`)."""

from __future__ import annotations

from pgrpo.stages.commands import USER_TOOLS, Commands, json_arg


def add_commands(commands: Commands) -> None:
    p = commands.add("doctor", USER_TOOLS, "before any GPU-hour: GPU, driver vs CUDA, bf16, memory, cache, disk "
                     "(exit 2 names the first failure)", _doctor)
    p.add_argument("--config", help="config YAML: check every GPU job of its grid (default: config/config.yaml)")
    p.add_argument("--model-json", help="one job's model spec as JSON (how the rules call it)")
    p.add_argument("--training-json", help="the training section as JSON (a training job)")
    p.add_argument("--bookkeeping-file", help="the training section's bookkeeping keys (resources ...), a JSON file")
    p.add_argument("--evaluation-json", help="the evaluation section as JSON (an evaluation job)")
    p.add_argument("--cuda", help='software.cuda the job\'s env was built for ("13" or "12"): the driver minimum')
    p.add_argument("--data-json", help="the data section as JSON (its datasets must be cached when offline)")


def _doctor(args):
    import json
    from pathlib import Path

    from pgrpo.stages import doctor
    from pgrpo.stages.commands import args_config

    if not args.model_json:
        doctor.run_doctor(config=args_config(args))
        return 0
    training = json_arg(args.training_json, "--training-json") if args.training_json else None
    if training is not None and args.bookkeeping_file:
        training = {**training, **json.loads(Path(args.bookkeeping_file).read_text())}
    doctor.run_doctor(model=json_arg(args.model_json, "--model-json"), training=training,
                      evaluation=json_arg(args.evaluation_json, "--evaluation-json") if args.evaluation_json else None,
                      data=json_arg(args.data_json, "--data-json") if args.data_json else None, cuda=args.cuda)
    return 0
