"""``pgrpo data STEP`` and ``pgrpo build-tiny``: the synthetic datasets and the embedded tiny model
(:mod:`pgrpo.stages.model`)."""

from __future__ import annotations

from pgrpo.stages.commands import WORKFLOW_STAGES, Commands, add_section_args, config_section


def add_commands(commands: Commands) -> None:
    data = commands.add_steps("data", WORKFLOW_STAGES, "datasets", _data, dest="data_verb")
    p = data.add_parser("synthetic", help="write the synthetic GSM8K-style sft/train/test sets")
    add_section_args(p)
    p.add_argument("--out-dir", required=True)
    p = data.add_parser("suite", help="write the graded synthetic benchmarks of synthetic.suite")
    add_section_args(p)
    p.add_argument("--data-dir", required=True, help="the splits written by 'pgrpo data synthetic'")
    p.add_argument("--out-dir", required=True)

    p = commands.add("build-tiny", WORKFLOW_STAGES, "build and warm-start the embedded tiny model and tokenizer",
                     _build_tiny)
    add_section_args(p)
    p.add_argument("--data-dir", required=True, help="directory with sft.jsonl and test.jsonl")
    p.add_argument("--out-dir", required=True)
    p.add_argument("--seed", type=int, default=None, help="overrides tiny.seed")


def _data(args):
    from pgrpo.stages import model

    if args.data_verb == "suite":
        counts = model.run_make_suite(data_dir=args.data_dir, out_dir=args.out_dir,
                                      cfg=config_section(args, "synthetic"))
        print(", ".join(f"{name}: {n}" for name, n in counts.items()) or "synthetic.suite is empty")
        return
    model.run_make_synthetic(out_dir=args.out_dir, cfg=config_section(args, "synthetic"))


def _build_tiny(args):
    from pgrpo.stages import model

    model.run_build_tiny(data_dir=args.data_dir, out_dir=args.out_dir, cfg=config_section(args, "tiny"),
                         seed=args.seed)
