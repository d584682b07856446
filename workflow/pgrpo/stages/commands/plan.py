"""The verbs a user runs on a config before submitting it: ``pgrpo validate`` and ``pgrpo plan``
(:mod:`pgrpo.config`, :mod:`pgrpo.stages.plan`)."""

from __future__ import annotations

import sys

from pgrpo.stages.commands import USER_TOOLS, Commands, args_config


def add_commands(commands: Commands) -> None:
    p = commands.add("plan", USER_TOOLS, "price a grid before submission: steps, tokens, GPU-hours, runtime per job",
                     _plan)
    p.add_argument("--config", help="config YAML (default: config/config.yaml)")
    p.add_argument("--md", help="also write the plan to this Markdown file")

    p = commands.add("validate", USER_TOOLS, "validate a config file against config/schema.yaml", _validate)
    p.add_argument("config", help="config YAML file")


def _validate(args):
    from pgrpo.config import chat_template_warnings, load_config

    config = load_config(args.config)
    for warning in chat_template_warnings(config):
        print(f"warning: {warning}", file=sys.stderr)
    print(f"{args.config}: valid")


def _plan(args):
    from pgrpo.stages import plan

    plan.run_plan(args_config(args), out_md=args.md)
