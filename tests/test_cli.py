"""The ``pgrpo`` command line: the verbs registered by the stages' command modules, ``pgrpo --help`` in groups, the
exit codes of a user's mistake, and a help that imports no heavy library."""

from __future__ import annotations

import argparse
import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pgrpo import cli

REPO_ROOT = Path(__file__).resolve().parents[1]
PACKAGE = REPO_ROOT / "workflow" / "pgrpo"

#: The verbs of pgrpo.cli before its verbs moved into the stages' command modules (written out by hand).
VERBS_BEFORE = {
    "validate", "predict", "symbolic", "bandit", "data", "build-tiny", "train", "kref-sweep", "aggregate", "fit",
    "figure1", "forecast", "evaluate", "prepare-benchmark", "plan", "table1", "passk-curves", "diagnostics",
    "diagnose", "forecast-summary", "forecast-benchmark", "diagnose-benchmark", "readme",
    "doctor",  # issue 19: the node check before any GPU-hour
    "prefetch", "evaluate-checkpoint", "join-evaluations",  # issue 19: offline clusters, evaluation jobs
    "replay", "watch", "live-benchmark",  # issue 20: the run read while it goes
    "kref-grid",  # issue 25: the K_ref grid chosen from the measured K
    "job-costs",  # issue 24: where the main job's time goes
}
#: Each verb's group; the rest are workflow stages.
USER_TOOLS = {"diagnose", "forecast", "predict", "plan", "validate", "doctor", "replay", "watch"}
BENCHMARKS = {"forecast-benchmark", "diagnose-benchmark", "live-benchmark"}
STEPS = {"bandit": {"calibrate", "sweep", "regime-map", "verdict", "finite-g", "sensitivity"},
         "data": {"synthetic", "suite"}, "readme": {"numbers", "update", "check"}}


def subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)


def help_sections(text: str) -> dict[str, list[str]]:
    """The sections of a help text (a line ending in ':' at column 0) -> the names listed in them."""
    sections: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if re.fullmatch(r"[a-z][a-z ]*:", line):
            current = sections.setdefault(line[:-1], [])
        elif current is not None and (match := re.match(r"  ([a-z0-9][a-z0-9-]*)\s", line + " ")):
            current.append(match[1])
        elif not line.strip():
            current = None
    return sections


def run_pgrpo(*args: str, code: str | None = None) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "workflow"), "COLUMNS": "120"}
    command = [sys.executable, "-c", code] if code else [sys.executable, "-m", "pgrpo", *args]
    return subprocess.run(command, capture_output=True, text=True, env=environment, cwd=REPO_ROOT, timeout=120)


def test_the_verbs_are_those_of_before():
    choices = subparsers(cli.build_parser()).choices
    assert set(choices) == VERBS_BEFORE
    assert set(cli.VERBS) == VERBS_BEFORE
    assert sorted(v for names in cli.COMMAND_GROUPS.values() for v in names) == sorted(VERBS_BEFORE)


def test_command_groups_are_the_three_groups_in_order():
    assert list(cli.COMMAND_GROUPS) == ["user tools", "workflow stages", "benchmarks"]
    assert set(cli.COMMAND_GROUPS["user tools"]) == USER_TOOLS
    assert set(cli.COMMAND_GROUPS["benchmarks"]) == BENCHMARKS
    assert set(cli.COMMAND_GROUPS["workflow stages"]) == VERBS_BEFORE - USER_TOOLS - BENCHMARKS


def test_grouped_help_lists_every_verb_once_under_its_group(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert text.startswith("usage: pgrpo [-h] VERB ...")
    sections = help_sections(text)
    listed = [v for title in cli.COMMAND_GROUPS for v in sections.get(title, [])]
    assert sorted(listed) == sorted(VERBS_BEFORE)  # every verb once, in one of the three groups
    for title, names in cli.COMMAND_GROUPS.items():
        assert sections[title] == names, title  # under its group, in display order
    lines = {line.dest: line.help for line in subparsers(cli.build_parser())._choices_actions}
    for verb, one_line in lines.items():  # each verb's one-line help beside it
        assert re.search(rf"^  {verb} +{re.escape(' '.join(one_line.split()[:3]))}", text, re.M), verb
    assert "-h, --help" in text


@pytest.mark.parametrize("verb", sorted(VERBS_BEFORE))
def test_every_verb_and_step_parses_help(verb, capsys):
    paths = [[verb]] + [[verb, step] for step in sorted(STEPS.get(verb, ()))]
    for path in paths:
        with pytest.raises(SystemExit) as exit_info:
            cli.main([*path, "--help"])
        assert exit_info.value.code == 0, path
        out = capsys.readouterr().out
        assert out.startswith(f"usage: pgrpo {' '.join(path)} "), path


def test_the_parser_tree_can_be_walked():
    root = cli.build_parser()
    for verb, parser in subparsers(root).choices.items():
        assert parser.prog == f"pgrpo {verb}"
        steps = subparsers(parser)
        assert (set(steps.choices) if steps else set()) == STEPS.get(verb, set()), verb


def test_a_bad_input_exits_2_with_one_line():
    result = run_pgrpo("train", "--model-json", "{bad", "--G", "4", "--seed", "1", "--out-dir", "unused")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("pgrpo train: error: --model-json is not valid")


def test_input_and_file_errors_exit_2_in_main(monkeypatch, capsys, tmp_path):
    assert cli.main(["evaluate", "--model-json", "[]", "--benchmark", "b", "--json", str(tmp_path / "e.json")]) == 2
    assert capsys.readouterr().err == "pgrpo evaluate: error: --model-json must be a JSON object\n"

    def missing(args):
        raise FileNotFoundError(2, "No such file or directory", "run/log.csv")

    monkeypatch.setitem(cli.VERBS, "aggregate", missing)
    assert cli.main(["aggregate", "run/log.csv", "--out", str(tmp_path / "a.csv")]) == 2
    assert capsys.readouterr().err == "pgrpo aggregate: error: file not found: run/log.csv\n"


def test_train_merges_the_bookkeeping_file_into_the_training_json(monkeypatch, tmp_path, capsys):
    from pgrpo.stages import train

    calls = []
    monkeypatch.setattr(train, "run_train", lambda **kwargs: calls.append(kwargs))
    bookkeeping = tmp_path / "bookkeeping.json"
    bookkeeping.write_text('{"checkpoint_steps": 5, "resources": {"gpus": 0}}')
    argv = ["train", "--model-json", '{"name": "m", "path": "p"}', "--training-json", '{"max_steps": 3}', "--G", "4",
            "--seed", "1", "--out-dir", str(tmp_path / "run")]
    assert cli.main([*argv, "--bookkeeping-file", str(bookkeeping)]) == 0
    assert calls[0]["training"] == {"max_steps": 3, "checkpoint_steps": 5, "resources": {"gpus": 0}}
    assert cli.main(argv) == 0 and calls[1]["training"] == {"max_steps": 3}
    assert cli.main([*argv, "--bookkeeping-file", str(tmp_path / "none.json")]) == 2 and len(calls) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_a_closed_pipe_exits_0():
    code = ("import sys\nfrom pgrpo import cli\n"
            "def closed(args):\n    raise BrokenPipeError\n"
            "cli.VERBS['validate'] = closed\nsys.exit(cli.main(['validate', 'x.yaml']))\n")
    result = run_pgrpo(code=code)
    assert result.returncode == 0, result.stderr


def test_help_imports_no_heavy_library():
    code = ("import sys\nfrom pgrpo.cli import build_parser\nbuild_parser().format_help()\n"
            "print(' '.join(m for m in ('torch', 'trl', 'transformers', 'pandas', 'numpy', 'matplotlib', 'sympy', "
            "'scipy', 'yaml') if m in sys.modules))\n"
            "print(' '.join(sorted(m for m in sys.modules if m.startswith('pgrpo.') "
            "and not m.startswith('pgrpo.stages.commands'))))\n")
    result = run_pgrpo(code=code)
    assert result.returncode == 0, result.stderr
    heavy, package = result.stdout.splitlines()
    assert heavy == ""
    # no stage module's body; pgrpo.input_errors is the standard library's (the exit-2 marker of a retried job)
    assert set(package.split()) == {"pgrpo.cli", "pgrpo.errors", "pgrpo.input_errors", "pgrpo.stages"}


def rule_commands() -> dict[str, tuple[list[str], set[str]]]:
    """Rule -> (the pgrpo verb and step its shell runs, the flags it passes), from workflow/rules/*.smk."""
    found = {}
    for path in sorted((REPO_ROOT / "workflow" / "rules").glob("*.smk")):
        for block in re.split(r"^(?=(?:rule|checkpoint) \w+:)", path.read_text(), flags=re.M)[1:]:
            name = re.match(r"(?:rule|checkpoint) (\w+):", block)[1]
            shell = re.search(r"^    shell:\n((?:\s+(?:\"[^\n]*\"|'[^\n]*')\n)+)", block + "\n", re.M)
            if not shell:
                continue
            text = "".join(ast.literal_eval(line.strip()) for line in shell[1].splitlines() if line.strip())
            command = re.search(r"(?:python -m pgrpo|\{params\.launcher\}) ([a-z][a-z0-9-]*)"
                                r"((?: [a-z][a-z0-9-]*)?)(.*)", text)
            if command:
                words = [command[1]] + command[2].split()
                found[name] = (words, set(re.findall(r"(?<!\S)(--[A-Za-z][A-Za-z0-9-]*)", command[3])))
    return found


def test_every_flag_the_rules_pass_is_an_option_of_their_verb():
    commands = rule_commands()
    assert {"train", "kref_train", "evaluate", "bandit_calibrate", "readme_numbers"} <= set(commands)
    for rule, (words, flags) in commands.items():
        parser = cli.build_parser()
        for word in words:
            steps = subparsers(parser)
            if steps is None:
                break
            assert word in steps.choices, (rule, words)
            parser = steps.choices[word]
        assert subparsers(parser) is None, f"rule {rule}: `pgrpo {' '.join(words)}` names no step"
        options = {o for action in parser._actions for o in action.option_strings}
        assert flags and not flags - options, f"rule {rule}: pgrpo {' '.join(words)} has no {sorted(flags - options)}"


def top_level_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_command_modules_import_their_stage_only_when_the_verb_runs():
    modules = sorted((PACKAGE / "stages" / "commands").glob("*.py"))
    assert len(modules) > 10
    allowed = set(sys.stdlib_module_names) | {"__future__", "pgrpo.errors", "pgrpo.stages.commands"}
    for path in modules:
        extra = {m for m in top_level_imports(path) if m not in allowed and m.split(".")[0] not in allowed}
        assert not extra, f"{path.name} imports at its top: {sorted(extra)}"
        if path.name != "__init__.py":
            assert "def add_commands(" in path.read_text(), path.name


def test_no_stage_imports_the_cli():
    for path in sorted((PACKAGE / "stages").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n == "pgrpo.cli" or n.startswith("pgrpo.cli.") for n in names), path
