"""The registrar of the ``pgrpo`` verbs and the helpers their handlers share.

Each module of this package mirrors one stage module (``commands/fit.py`` registers the verbs that
``pgrpo.stages.fit`` implements) and defines ``add_commands(commands)``: it adds its verbs with
:meth:`Commands.add` (or :meth:`Commands.add_steps` for a verb with sub-steps, ``pgrpo bandit sweep``), each with
its group, one-line help and handler. The handlers import their stage module inside the function, so building the
parser (``pgrpo --help``) imports only argparse and the standard library, never pandas, matplotlib, sympy or torch,
and ``python -m pgrpo VERB`` imports what that verb needs, as the rules' conda envs (envs/*.yaml) pin it.
The CLI (``pgrpo.cli``) calls every ``add_commands`` in a fixed order; nothing here imports the CLI.
"""

from __future__ import annotations

import argparse
import json
from collections import OrderedDict
from typing import Any, Callable

from pgrpo.errors import InputError

#: The groups of ``pgrpo --help``, in display order.
USER_TOOLS = "user tools"
WORKFLOW_STAGES = "workflow stages"
BENCHMARKS = "benchmarks"
GROUPS = (USER_TOOLS, WORKFLOW_STAGES, BENCHMARKS)

Handler = Callable[[argparse.Namespace], Any]


class Commands:
    """Adds verbs to a root parser's ``VERB`` subparsers and records each verb's group and handler."""

    def __init__(self, subparsers: argparse._SubParsersAction):
        self.subparsers = subparsers
        self.handlers: dict[str, Handler] = {}
        self.groups: OrderedDict[str, list[str]] = OrderedDict((title, []) for title in GROUPS)

    def add(self, name: str, group: str, help: str, handler: Handler) -> argparse.ArgumentParser:
        """Add the verb ``name`` under ``group``; ``handler(args)`` runs it. Returns its parser for its arguments."""
        if group not in self.groups:
            raise ValueError(f"verb {name}: unknown group {group!r} (one of {', '.join(self.groups)})")
        if name in self.handlers:
            raise ValueError(f"verb {name} is registered twice")
        parser = self.subparsers.add_parser(name, help=help)
        self.handlers[name] = handler
        self.groups[group].append(name)
        return parser

    def add_steps(self, name: str, group: str, help: str, handler: Handler, dest: str) -> argparse._SubParsersAction:
        """A verb with sub-steps (``pgrpo NAME STEP``): add each step's parser with ``.add_parser(step, help=...)``;
        ``args.<dest>`` names the step the handler runs."""
        return self.add(name, group, help, handler).add_subparsers(dest=dest, required=True, metavar="STEP")


# ---------------------------------------------------------------------------------------------------- helpers


def config_section(args: argparse.Namespace, name: str) -> dict:
    """The config section ``name``: from --section-json if given, else from --config (validated)."""
    if getattr(args, "section_json", None):
        return json_arg(args.section_json, "--section-json")
    return args_config(args)[name]


def args_config(args: argparse.Namespace) -> dict:
    """The config of --config (validated), the embedded default when omitted."""
    from pgrpo.config import DEFAULT_CONFIG_PATH, load_config

    return load_config(getattr(args, "config", None) or DEFAULT_CONFIG_PATH)


def model_spec(config: dict, name: str | None) -> dict:
    """The spec {name, id, path, ...} of the config's model ``name`` (--model)."""
    if not name or name not in config["models"]:
        raise InputError(f"--model must name one of the config's models: {', '.join(config['models'])}")
    return {"name": name, **config["models"][name]}


def model_and_config(args: argparse.Namespace) -> tuple[dict, dict | None]:
    """The model of --model-json and no config (how the rules call a verb: each section as JSON too), else the
    model --model of --config and that config."""
    if args.model_json:
        return json_arg(args.model_json, "--model-json"), None
    config = args_config(args)
    return model_spec(config, args.model), config


def json_sections(args: argparse.Namespace, *flags: str) -> list[dict]:
    """The JSON object of each flag (``--data-json`` is ``args.data_json``), ``{}`` for one omitted."""
    return [json_arg(getattr(args, flag.lstrip("-").replace("-", "_")) or "{}", flag) for flag in flags]


def benchmark_spec(config: dict, name: str) -> dict:
    """The spec of the config's benchmark ``name`` (--benchmark)."""
    if name not in config["benchmarks"]:
        raise InputError(f"--benchmark must name one of the config's benchmarks: {', '.join(config['benchmarks'])}")
    return config["benchmarks"][name]


def json_arg(text: str, flag: str) -> dict:
    """The JSON object passed to ``flag``."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(f"{flag} is not valid JSON ({error.msg} at char {error.pos})") from None
    if not isinstance(value, dict):
        raise InputError(f"{flag} must be a JSON object")
    return value


def add_section_args(parser: argparse.ArgumentParser) -> None:
    """--config and --section-json: where a verb reads its config section (see :func:`config_section`)."""
    parser.add_argument("--config", help="config YAML (default: config/config.yaml); validated against the schema")
    parser.add_argument("--section-json", help="the config section as JSON (how the Snakemake rules call it)")


def add_model_args(parser: argparse.ArgumentParser, model_json_help: str) -> None:
    """--config, --model and --model-json: the model of a verb run from a config or from the rule's JSON."""
    parser.add_argument("--config", help="config YAML (default: config/config.yaml)")
    parser.add_argument("--model", help="model name in the config (with --config)")
    parser.add_argument("--model-json", help=model_json_help)


def add_required(parser: argparse.ArgumentParser, *flags: str) -> None:
    """Required options without a help text (the files a rule passes: --csv, --md, --png ...), in this order."""
    for flag in flags:
        parser.add_argument(flag, required=True)


def add_workers_arg(parser: argparse.ArgumentParser) -> None:
    """``--workers N``: a corpus benchmark's processes (the rule passes its ``threads``; :mod:`pgrpo.parallel`)."""
    parser.add_argument("--workers", type=int, default=1, metavar="N",
                        help="score the corpus on N processes (default 1; the tables do not depend on N)")


def parse_component_ranges(triples) -> dict[str, tuple[float, float]]:
    """``--component-range FN LO HI`` (repeatable) as ``{FN: (LO, HI)}``; LO and HI not numbers, or not LO < HI, is
    an input error naming FN."""
    from pgrpo.errors import range_bounds

    return {fn: range_bounds((lo, hi), f"--component-range {fn}", text_ok=True) for fn, lo, hi in triples or ()}
