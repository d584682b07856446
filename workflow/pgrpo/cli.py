"""``pgrpo <verb>``: every stage of the workflow, usable outside Snakemake.

Each verb is registered by the command module of the stage that implements it (``pgrpo.stages.commands.<stage>``,
its ``add_commands``); this module calls them in a fixed order and prints ``pgrpo --help`` in three groups: the
user tools, the workflow stages (what the Snakemake rules run) and the benchmarks. A verb parses its arguments,
reads a config section (``--section-json`` as the Snakemake rules pass it, or ``--config FILE`` validated against
config/schema.yaml, the embedded default when omitted), and calls one ``run_*`` function of its stage. A user's
mistake prints one line naming the bad input and exits 2. Heavy libraries (torch, TRL, pandas, sympy) are imported
only by the verbs that need them, so ``--help`` is instant.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import OrderedDict
from typing import Any, Callable

from pgrpo.errors import InputError
from pgrpo.input_errors import earlier_failure, record_failure
from pgrpo.stages.commands import Commands
from pgrpo.stages.commands import aggregate as aggregate_commands
from pgrpo.stages.commands import bandit as bandit_commands
from pgrpo.stages.commands import diagnose as diagnose_commands
from pgrpo.stages.commands import diagnose_benchmark as diagnose_benchmark_commands
from pgrpo.stages.commands import doctor as doctor_commands
from pgrpo.stages.commands import eval_checkpoints as eval_checkpoints_commands
from pgrpo.stages.commands import evaluate as evaluate_commands
from pgrpo.stages.commands import fit as fit_commands
from pgrpo.stages.commands import forecast_benchmark as forecast_benchmark_commands
from pgrpo.stages.commands import job_costs as job_costs_commands
from pgrpo.stages.commands import kref_sweep as kref_sweep_commands
from pgrpo.stages.commands import live as live_commands
from pgrpo.stages.commands import model as model_commands
from pgrpo.stages.commands import plan as plan_commands
from pgrpo.stages.commands import predict as predict_commands
from pgrpo.stages.commands import prefetch as prefetch_commands
from pgrpo.stages.commands import prepare as prepare_commands
from pgrpo.stages.commands import readme as readme_commands
from pgrpo.stages.commands import symbolic as symbolic_commands
from pgrpo.stages.commands import train as train_commands

#: The command modules, in the order their verbs are shown within a group: the workflow's stages in the order its
#: rules run, the user's tools on a run's log, then on a configuration.
COMMAND_MODULES = (
    symbolic_commands, bandit_commands, prefetch_commands, model_commands, train_commands, eval_checkpoints_commands,
    kref_sweep_commands,
    aggregate_commands,
    fit_commands, prepare_commands, evaluate_commands, diagnose_commands, live_commands, readme_commands,
    forecast_benchmark_commands, diagnose_benchmark_commands, job_costs_commands, predict_commands, plan_commands,
    doctor_commands,
)

DESCRIPTION = "Predictable GRPO: closed-form dynamics, exact bandit, GRPO training, fits, forecasts."
EPILOG = "Run 'pgrpo VERB --help' for the arguments of a verb."


class GroupedHelpParser(argparse.ArgumentParser):
    """The root parser: its help lists the verbs under the titles of their groups instead of one flat list."""

    command_groups: OrderedDict[str, list[str]]

    def format_help(self) -> str:
        formatter = self._get_formatter()
        formatter.add_usage(self.usage, self._actions, self._mutually_exclusive_groups)
        formatter.add_text(self.description)
        verbs = next(a for a in self._actions if isinstance(a, argparse._SubParsersAction))
        lines = {line.dest: line for line in verbs._choices_actions}  # one pseudo-action per verb: name and help
        for title, names in self.command_groups.items():
            if names:
                formatter.start_section(title)
                formatter.add_arguments([lines[name] for name in names])
                formatter.end_section()
        formatter.start_section(self._optionals.title)
        formatter.add_arguments(self._optionals._group_actions)
        formatter.end_section()
        formatter.add_text(self.epilog)
        return formatter.format_help()


def _register() -> tuple[GroupedHelpParser, Commands]:
    parser = GroupedHelpParser(prog="pgrpo", description=DESCRIPTION, epilog=EPILOG)
    commands = Commands(parser.add_subparsers(dest="verb", required=True, metavar="VERB",
                                                 parser_class=argparse.ArgumentParser))
    for module in COMMAND_MODULES:
        module.add_commands(commands)
    parser.command_groups = commands.groups
    return parser, commands


def build_parser() -> argparse.ArgumentParser:
    """The root parser; every verb's parser is in ``choices`` of its ``_SubParsersAction`` (dest ``verb``)."""
    return _register()[0]


_, _COMMANDS = _register()
#: verb -> its handler (called with the parsed arguments; returns the exit status or None).
VERBS: dict[str, Callable[[argparse.Namespace], Any]] = dict(_COMMANDS.handlers)
#: group title -> its verbs, in display order (for ``pgrpo --help`` and a documentation generator).
COMMAND_GROUPS: OrderedDict[str, list[str]] = OrderedDict((t, list(v)) for t, v in _COMMANDS.groups.items())


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    earlier = earlier_failure(argv)  # the retry of a command that exited 2: exit 2 at once (pgrpo.input_errors)
    if earlier is not None:
        print(f"pgrpo: not retried: an earlier attempt of this command exited 2 (a bad input; fix it and run "
              f"snakemake again): {earlier}", file=sys.stderr)
        return 2
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:
        if stop.code == 2:
            record_failure(argv, "bad arguments (see the attempt's log)")
        raise
    handler = VERBS.get(args.verb)
    try:
        result = handler(args)
    except InputError as error:
        message = f"pgrpo {args.verb}: error: {error}"
        print(message, file=sys.stderr)
        record_failure(argv, message)
        return 2
    except FileNotFoundError as error:
        message = f"pgrpo {args.verb}: error: file not found: {error.filename or error}"
        print(message, file=sys.stderr)
        record_failure(argv, message)
        return 2
    except BrokenPipeError:  # output piped into `head` and closed: not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
