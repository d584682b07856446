"""The digest of the code a verb runs (pgrpo.stages.code_version), the analysis rules' ``code`` param.

On a small package written here, whose import graph is known by construction: which modules a verb reaches, that a
docstring, comment or layout edit leaves the digest as it was and a code edit in a reached module changes it, and
that the other verbs of the same command module are not reached. Then on the real package and rules: the analysis
rules carry the param of the verb their command runs, and no rule that trains, evaluates or decides training does.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from pgrpo.cli import VERBS
from pgrpo.stages.code_version import ModuleCache, code_closure, code_digest, code_digests, digest_of

DEMO = "pgrpo.stages.commands.demo"

FILES = {
    "__init__.py": '"""The package."""\n',
    "stages/__init__.py": "",
    "stages/commands/__init__.py": "GROUP = 'g'\n",
    "stages/commands/demo.py": '''
        """Two verbs."""
        from pgrpo.stages.commands import GROUP


        def add_commands(commands):
            p = commands.add("one", GROUP, "the first", _one)
            p.add_argument("--level", type=float, default=0.5)
            commands.add("two", GROUP, "the second", _two)


        def _one(args):
            from pgrpo.core import alpha

            return _shared(alpha())


        def _two(args):
            import pgrpo.lazy

            return _shared(pgrpo.lazy.load())


        def _shared(value):
            return value
        ''',
    "core.py": '''
        """Core."""
        from .helper import h


        def alpha():
            """Alpha."""
            return h() + 1
        ''',
    "helper.py": "def h():\n    return 41\n",
    "other.py": "def unused():\n    return 0\n",
    "lazy/__init__.py": '''
        import importlib


        def load():
            return importlib.import_module("pgrpo.lazy.impl").VALUE
        ''',
    "lazy/impl.py": "VALUE = 3\n",
}


@pytest.fixture
def package(tmp_path) -> Path:
    root = tmp_path / "pgrpo"
    for name, text in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def digest(package: Path, handler: str) -> str:
    return digest_of(code_closure(DEMO, handler, package))


def edit(package: Path, name: str, old: str, new: str) -> None:
    path = package / name
    text = path.read_text()
    assert old in text, (name, old)
    path.write_text(text.replace(old, new))


def test_a_verb_reaches_its_handler_imports_and_their_imports_with_their_packages(package):
    assert set(code_closure(DEMO, "_one", package)) == {
        "pgrpo", "pgrpo.stages", "pgrpo.stages.commands", DEMO, "pgrpo.core", "pgrpo.helper"}
    # a package's __init__, and a module named as a string to importlib
    assert set(code_closure(DEMO, "_two", package)) == {
        "pgrpo", "pgrpo.stages", "pgrpo.stages.commands", DEMO, "pgrpo.lazy", "pgrpo.lazy.impl"}


def test_docstrings_comments_and_layout_do_not_change_the_digest(package):
    before = digest(package, "_one")
    edit(package, "core.py", '"""Alpha."""', '"""Alpha, the first letter."""')
    edit(package, "core.py", "    return h() + 1", "    # one more than h\n\n    return h()  +  1")
    edit(package, "stages/commands/demo.py", '"""Two verbs."""', '"""Two verbs, one and two."""')
    assert digest(package, "_one") == before


def test_a_code_change_in_a_reached_module_changes_only_the_verbs_that_reach_it(package):
    one, two = digest(package, "_one"), digest(package, "_two")
    edit(package, "helper.py", "41", "42")  # reached by _one through a relative import
    assert digest(package, "_one") != one and digest(package, "_two") == two
    one = digest(package, "_one")
    edit(package, "lazy/impl.py", "3", "4")  # reached by _two through importlib
    assert digest(package, "_two") != two and digest(package, "_one") == one
    two = digest(package, "_two")
    edit(package, "other.py", "0", "1")  # reached by neither
    assert (digest(package, "_one"), digest(package, "_two")) == (one, two)


def test_the_other_verbs_of_the_command_module_are_not_part_of_a_verbs_code(package):
    one, two = digest(package, "_one"), digest(package, "_two")
    # what both call, and the arguments add_commands registers (their defaults), are part of both
    edit(package, "stages/commands/demo.py", "    return value", "    return value * 1")
    assert digest(package, "_one") != one and digest(package, "_two") != two
    one, two = digest(package, "_one"), digest(package, "_two")
    edit(package, "stages/commands/demo.py", "default=0.5", "default=0.25")
    assert digest(package, "_one") != one and digest(package, "_two") != two
    one, two = digest(package, "_one"), digest(package, "_two")
    edit(package, "stages/commands/demo.py", "return _shared(pgrpo.lazy.load())", "return 2 * pgrpo.lazy.load()")
    assert digest(package, "_one") == one and digest(package, "_two") != two


def test_the_cache_file_gives_the_same_digests_and_sees_a_changed_file(package, tmp_path):
    cache_file = tmp_path / "cache" / "digests.json"
    fresh = digest(package, "_one")
    assert digest_of(code_closure(DEMO, "_one", package, ModuleCache(cache_file))) == fresh
    cache = ModuleCache(cache_file)
    code_closure(DEMO, "_one", package, cache)
    cache.save()
    assert {str(Path(key).relative_to(package.resolve())) for key in ModuleCache(cache_file).entries} == {
        "__init__.py", "stages/__init__.py", "stages/commands/__init__.py", "core.py", "helper.py"}
    edit(package, "helper.py", "41", "420")  # another size: the entry is stale whatever the clock's resolution
    assert digest_of(code_closure(DEMO, "_one", package, ModuleCache(cache_file))) == digest(package, "_one") != fresh
    cache_file.write_text("{not json")  # a damaged cache is rebuilt, not trusted
    assert digest_of(code_closure(DEMO, "_one", package, ModuleCache(cache_file))) == digest(package, "_one")


def test_the_real_verbs_reach_their_stages_and_the_analysis_verbs_no_training_code():
    fit = set(code_closure("pgrpo.stages.commands.fit", "_fit"))
    assert {"pgrpo.stages.fit", "pgrpo.fit.laws", "pgrpo.fit.least_squares"} <= fit
    symbolic = set(code_closure("pgrpo.stages.commands.symbolic", "_symbolic"))
    assert {"pgrpo.stages.symbolic", "pgrpo.theory.symbolic_claims"} <= symbolic
    assert "pgrpo.fit.laws" not in symbolic
    train = set(code_closure("pgrpo.stages.commands.train", "_train"))
    assert "pgrpo.grpo.trainer" in train
    for verb in ("fit", "forecast", "diagnostics", "forecast-benchmark", "live-benchmark", "readme"):
        handler = VERBS[verb]
        assert "pgrpo.grpo.trainer" not in code_closure(handler.__module__, handler.__name__), verb
    assert re.fullmatch(r"[0-9a-f]{16}", code_digest(VERBS["fit"]))
    assert code_digests({"fit": VERBS["fit"]}) == {"fit": code_digest(VERBS["fit"])}


#: every CPU rule downstream of training; the rules that train, evaluate or decide what is trained take no code param
ANALYSIS_RULES = {
    "verify_symbolic", "bandit_calibrate", "bandit_sweep", "bandit_regime_map", "bandit_verdict",
    "bandit_sensitivity", "bandit_finite_g", "aggregate_seeds", "fit_laws", "figure1", "forecast_run",
    "forecast_summary", "forecast_benchmark", "diagnostics", "diagnose_benchmark", "table1", "passk_curves",
    "kref_sweep", "live_benchmark", "live_replay", "readme_numbers", "job_costs", "join_evaluations"}
NO_CODE_PARAM = {"train", "evaluate", "evaluate_checkpoint", "kref_train", "kref_grid", "build_tiny_model",
                 "make_synthetic_data", "make_synthetic_suite", "prepare_benchmark", "prefetch"}


def rule_blocks(repo_root: Path) -> dict[str, str]:
    blocks = {}
    for path in sorted((repo_root / "workflow" / "rules").glob("*.smk")):
        parts = re.split(r"^\s*(?:rule|checkpoint) (\w+):\n", path.read_text(), flags=re.M)
        blocks.update(zip(parts[1::2], parts[2::2]))
    return blocks


def test_the_analysis_rules_carry_the_digest_of_the_verb_their_command_runs(repo_root):
    blocks = rule_blocks(repo_root)
    assert ANALYSIS_RULES | NO_CODE_PARAM <= set(blocks)
    with_param = {rule for rule, text in blocks.items() if "code=code_version(" in text}
    assert with_param == ANALYSIS_RULES
    for rule in ANALYSIS_RULES:
        (verb,) = re.findall(r'code=code_version\("([\w-]+)"\)', blocks[rule])
        assert f"python -m pgrpo {verb} " in blocks[rule], rule
        assert verb in VERBS, rule
