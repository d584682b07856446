"""Extract the (gold, prediction, expected) cases of math-verify's regression tests into a JSON file.

The cases come from ``tests/test_all.py`` and ``tests/test_numina_cases.py`` of
https://github.com/huggingface/Math-Verify. Every test there calls the helper ``compare_strings(gold, pred,
match_types=..., precision=..., strict=..., allow_set_relation_comp=...)``, which parses both strings with
``parse(s, [LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()])`` (the targets named by
``match_types``) and compares them with ``verify(gold, pred, float_rounding=precision, strict=strict,
allow_set_relation_comp=...)``. This script reads the test files with ``ast`` (nothing of them is imported or
run), takes each ``@pytest.mark.parametrize`` table, and records for every row the arguments that the test passes
to ``compare_strings`` (its ``config``): these are non-default for some tests (``match_types=["expr"]`` or
``["latex"]``, ``precision`` 2/4/5, ``allow_set_relation_comp``), so a comparison must apply them.
Direct ``compare_strings`` calls with literal arguments outside a table (in ``test_precision``) are recorded too;
the ``sympy_expr_eq`` assertions on SymPy objects are not string cases and are skipped.

Regenerate (from the repository root; the fetch tool or ``git clone`` gives a copy of Math-Verify)::

    git clone https://github.com/huggingface/Math-Verify /tmp/Math-Verify   # or an existing mirror
    .venv/bin/python tests/data/extract_math_verify_cases.py /tmp/Math-Verify \
        [--commit 5d148cfaaf99214c2e4ffb4bc497ab042c592a7a] [--out tests/data/math_verify_cases.json]

The files are read with ``git show <commit>:<path>``, so the repository may be a bare mirror. Without
``--commit`` the repository's HEAD is used and recorded.
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

SOURCE_URL = "https://github.com/huggingface/Math-Verify"
FILES = ("tests/test_all.py", "tests/test_numina_cases.py")
#: compare_strings' defaults (tests/test_all.py).
DEFAULT_CONFIG = {"match_types": ["latex", "expr"], "precision": 6, "strict": True, "allow_set_relation_comp": False}
CONFIG_KEYS = tuple(DEFAULT_CONFIG)
#: What compare_strings builds for each match type (the latex one is NOT math-verify's default boxed priority 50).
EXTRACTION_TARGETS = {"latex": "LatexExtractionConfig(boxed_match_priority=0)", "expr": "ExprExtractionConfig()"}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def _value(node: ast.AST) -> Any:
    """A literal, or one of the few computed literals the tables use (``f"{math.sqrt(17):.15f}"``)."""
    try:
        return ast.literal_eval(node)
    except ValueError:
        pass
    allowed = (ast.Expression, ast.Tuple, ast.List, ast.JoinedStr, ast.FormattedValue, ast.Constant, ast.Call, ast.Attribute, ast.Name,
               ast.Load, ast.UnaryOp, ast.USub, ast.BinOp, ast.Div, ast.Mult, ast.Add, ast.Sub)
    expr = ast.Expression(node)
    for sub in ast.walk(expr):
        if not isinstance(sub, allowed) or (isinstance(sub, ast.Name) and sub.id != "math"):
            raise ValueError(f"unsupported expression in a test table: {ast.unparse(node)}")
    return eval(compile(expr, "<case>", "eval"), {"__builtins__": {}, "math": math})


def _parametrize(func: ast.FunctionDef) -> tuple[list[str], list[ast.AST]] | None:
    for dec in func.decorator_list:
        if isinstance(dec, ast.Call) and ast.unparse(dec.func).endswith("mark.parametrize"):
            names = _value(dec.args[0])
            names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
            rows = dec.args[1]
            if not isinstance(rows, (ast.List, ast.Tuple)):
                raise ValueError(f"{func.name}: parametrize table is not a literal list")
            return names, list(rows.elts)
    return None


def _compare_calls(func: ast.FunctionDef) -> list[ast.Call]:
    return [n for n in ast.walk(func) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
            and n.func.id == "compare_strings"]


def _expected_of(call: ast.Call, func: ast.FunctionDef) -> ast.AST:
    """The right side of ``assert compare_strings(...) == <expected>``."""
    for node in ast.walk(func):
        if isinstance(node, ast.Compare) and node.left is call and isinstance(node.ops[0], ast.Eq):
            return node.comparators[0]
    raise ValueError(f"{func.name}: compare_strings call is not compared with ==")


def _bind(node: ast.AST, env: dict[str, Any]) -> Any:
    if isinstance(node, ast.Name) and node.id in env:
        return env[node.id]
    return _value(node)


def cases_of_file(source: str, path: str) -> list[dict[str, Any]]:
    tree = ast.parse(source)
    out: list[dict[str, Any]] = []
    for func in [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")]:
        calls = _compare_calls(func)
        if not calls:
            continue
        table = _parametrize(func)
        rows: list[dict[str, Any]] = [{}]
        if table is not None:
            names, elts = table
            rows = []
            for elt in elts:
                values = _value(elt)
                if len(values) != len(names):
                    raise ValueError(f"{path}:{func.name}: row of {len(values)} values for {names}")
                rows.append(dict(zip(names, values)))
        for call in calls:
            expected_node = _expected_of(call, func)
            for index, env in enumerate(rows):
                gold, pred = (_bind(a, env) for a in call.args[:2])
                config = dict(DEFAULT_CONFIG)
                for kw in call.keywords:
                    if kw.arg not in CONFIG_KEYS:
                        raise ValueError(f"{path}:{func.name}: unknown compare_strings argument {kw.arg}")
                    config[kw.arg] = _bind(kw.value, env)
                expected = _bind(expected_node, env)
                out.append({
                    "id": f"{Path(path).stem}::{func.name}[{index}]",
                    "file": path,
                    "test": func.name,
                    "line": call.lineno if table is None else elts[index].lineno,
                    "gold": gold,
                    "prediction": pred,
                    "expected": bool(expected),
                    "config": config,
                })
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("repo", type=Path, help="a clone (or bare mirror) of huggingface/Math-Verify")
    ap.add_argument("--commit", default=None, help="commit to read (default: HEAD)")
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("math_verify_cases.json"))
    args = ap.parse_args(argv)
    commit = git(args.repo, "rev-parse", args.commit or "HEAD").strip()
    cases: list[dict[str, Any]] = []
    for path in FILES:
        cases += cases_of_file(git(args.repo, "show", f"{commit}:{path}"), path)
    version_line = [ln for ln in git(args.repo, "show", f"{commit}:pyproject.toml").splitlines()
                    if ln.startswith("version")]
    doc = {
        "source": SOURCE_URL,
        "repository": "huggingface/Math-Verify",
        "commit": commit,
        "commit_date": git(args.repo, "show", "-s", "--format=%cI", commit).strip(),
        "package_version_at_commit": version_line[0].split("=")[1].strip().strip('"') if version_line else None,
        "files": list(FILES),
        "license": "Apache-2.0 (repository LICENCE file and pyproject.toml); tests/test_all.py also carries an MIT "
                   "License header, Copyright (c) 2024 The HuggingFace Team",
        "generated_by": "tests/data/extract_math_verify_cases.py",
        "comparison": "compare_strings(gold, prediction, **config) in tests/test_all.py: parse(s, targets) with "
                      "targets from config.match_types, then verify(gold, pred, float_rounding=config.precision, "
                      "strict=config.strict, allow_set_relation_comp=config.allow_set_relation_comp)",
        "extraction_targets": EXTRACTION_TARGETS,
        "notes": "every row of every parametrize table whose test calls compare_strings, in file order, duplicates "
                 "kept; test_precision's literal compare_strings call is included, its sympy_expr_eq assertions "
                 "(SymPy objects, not strings) are not",
        "count": len(cases),
        "cases": cases,
    }
    args.out.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{len(cases)} cases from {commit[:12]} -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
