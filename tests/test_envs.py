"""The conda envs of the rules (envs/*.yaml): each pins what its rules import, and each resolves.

Coverage (fast, no network): every rule of workflow/rules/*.smk -> its ``conda:`` env (a path, or a function of
common.smk: then every env that function can return) -> the ``pgrpo`` verb its shell runs (``python -m pgrpo VERB``
or ``{params.launcher} VERB``) -> the package modules that verb imports, read with ``ast`` (the CLI handler and the
CLI helpers it calls, then every module reached, function-level imports included, parent packages too) -> the
third-party top-level names -> their distributions, each of which must be pinned (``name==version``) in the env.
Imports inside ``try: ... except ImportError`` are optional, and so is vLLM (imported only behind
``training.use_vllm`` / ``evaluation.backend``): an env a rule takes for vLLM must pin it. The envs' pins are the
versions this test suite runs with, except the documented differences of the vLLM envs (:data:`VLLM_ENVS`).

Resolution (marked ``envs`` and ``slow``: PyPI is needed, about a minute): each env's pip section is resolved by
pip's resolver (``pip install --dry-run --ignore-installed --report``, wheels only but for deepspeed, which is a
source archive) with this machine's pip configuration (local wheel folders, constraints) set aside; no conda channel
is needed (the conda part is ``python=3.11`` and ``pip``).
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
PACKAGE = REPO_ROOT / "workflow" / "pgrpo"
RULES = REPO_ROOT / "workflow" / "rules"
ENVS = REPO_ROOT / "envs"

#: Imported only behind a setting: where a rule's env is the one for that setting, it must pin the distribution.
OPTIONAL = {"vllm": "training.use_vllm / evaluation.backend: vllm (envs/*-vllm.yaml)"}

#: Import names whose distribution is named otherwise, for what is not installed here.
DISTRIBUTION_OF = {"yaml": "pyyaml", "vllm": "vllm", "deepspeed": "deepspeed", "math_verify": "math-verify",
                   "sklearn": "scikit-learn", "PIL": "pillow"}

#: vLLM env -> (the env it extends, the pins it changes and why). vLLM 0.31.0 (the newest TRL 1.16 supports) pins
#: torch==2.13.0 and needs transformers >=5.10.4,<5.18 and, through mistral-common on Python <= 3.12, numpy <2.4.
VLLM_ENVS = {
    "train-vllm": ("train", {"vllm": "0.31.0", "transformers": "5.17.0", "numpy": "2.3.5",
                             "huggingface-hub": "1.33.0"}),
    "evaluate-vllm": ("evaluate", {"vllm": "0.31.0", "transformers": "5.17.0", "numpy": "2.3.5",
                                   "huggingface-hub": "1.33.0"}),
}

#: CUDA 12 variant (software.cuda: "12") -> (its CUDA 13 env, the pins it changes, the pip options it adds): torch
#: 2.13.0 from PyTorch's cu129 index and vLLM 0.31.0's +cu129 build instead of PyPI's CUDA 13 wheels, nothing else.
TORCH_CU12_INDEX = "--extra-index-url https://download.pytorch.org/whl/cu129"
VLLM_CU12_INDEX = "--extra-index-url https://wheels.vllm.ai/0.31.0/cu129"
CUDA12_ENVS = {
    "train-cu12": ("train", {"torch": "2.13.0+cu129"}, [TORCH_CU12_INDEX]),
    "evaluate-cu12": ("evaluate", {"torch": "2.13.0+cu129"}, [TORCH_CU12_INDEX]),
    "train-vllm-cu12": ("train-vllm", {"torch": "2.13.0+cu129", "vllm": "0.31.0+cu129"},
                        [TORCH_CU12_INDEX, VLLM_CU12_INDEX]),
    "evaluate-vllm-cu12": ("evaluate-vllm", {"torch": "2.13.0+cu129", "vllm": "0.31.0+cu129"},
                           [TORCH_CU12_INDEX, VLLM_CU12_INDEX]),
}

#: Pinned in an env but not installed by `make setup` (yet): checked by the resolution test only.
NOT_IN_TEST_VENV: set[str] = set()

#: Rule changes the workflow still needs (workflow/rules/*.smk); each listed check is an expected failure until then
#: (strict: once the rule is changed the check passes and the entry must go).
PENDING_RULE_CHANGES: dict[str, str] = {}


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


# ------------------------------------------------------------------------------------------------ envs


@cache
def env(name: str) -> dict:
    """``{"python": "3.11", "pins": {dist: version}, "options": [pip options], "unpinned": [...]}`` of
    envs/NAME.yaml (an option is a line starting with ``-``, such as ``--extra-index-url URL``)."""
    spec = yaml.safe_load((ENVS / f"{name}.yaml").read_text())
    python, pip = None, []
    for dep in spec["dependencies"]:
        if isinstance(dep, dict):
            pip += dep.get("pip", [])
        elif str(dep).startswith("python"):
            python = str(dep).split("=", 1)[1].lstrip("=")
    pins, unpinned, options = {}, [], []
    for line in pip:
        if line.strip().startswith("-"):
            options.append(line.strip())
            continue
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)", line.strip())
        if match:
            pins[normalise(match[1])] = match[2]
        else:
            unpinned.append(line)
    return {"python": python, "pins": pins, "unpinned": unpinned, "options": options, "pip": pip}


def env_names() -> list[str]:
    return sorted(p.stem for p in ENVS.glob("*.yaml"))


# ------------------------------------------------------------------------------------------------ rules


def smk_functions() -> dict[str, str]:
    """Source of every top-level ``def`` in workflow/rules/*.smk (for ``conda: some_function(...)``)."""
    functions = {}
    for path in sorted(RULES.glob("*.smk")):
        text = path.read_text()
        for match in re.finditer(r"^def (\w+)\(.*?(?=^\S)", text + "\n#", re.S | re.M):
            functions[match[1]] = match[0]
    return functions


@cache
def rules() -> dict[str, dict]:
    """``{rule: {"file", "envs": [env names], "conda": raw value, "verb": pgrpo verb or None}}``."""
    functions = smk_functions()
    found = {}
    for path in sorted(RULES.glob("*.smk")):
        blocks = re.split(r"^(?=(?:rule|checkpoint) \w+:)", path.read_text(), flags=re.M)
        for block in blocks:
            head = re.match(r"(?:rule|checkpoint) (\w+):", block)
            if not head:
                continue
            block = re.split(r"^\S", block[head.end():], maxsplit=1, flags=re.M)[0]  # up to the next top level
            conda = re.search(r"^\s+conda:\s*\n\s+(.+?)\s*$", block, re.M)
            raw = conda[1] if conda else None
            envs = []
            if raw and raw.startswith(("'", '"')):
                envs = [Path(ast.literal_eval(raw)).stem]
            elif raw:
                call = re.match(r"(\w+)\(", raw)
                source = functions.get(call[1], "") if call else ""
                envs = sorted({Path(p).stem for p in re.findall(r"envs/([\w.-]+\.yaml)", source)})
            shell = block.split("shell:", 1)[1] if "shell:" in block else ""
            verb = re.search(r"(?:python -m pgrpo|\{params\.launcher\})\s+([a-z][a-z0-9-]*)", shell)
            found[head[1]] = {"file": path.name, "conda": raw, "envs": envs, "verb": verb[1] if verb else None,
                              "launcher": "{params.launcher}" in shell}
    return found


# ------------------------------------------------------------------------------------------------ imports


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


@cache
def parsed(name: str) -> ast.Module:
    return ast.parse(modules()[name].read_text())


def _catches_import_error(node: ast.Try) -> bool:
    for handler in node.handlers:
        names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        if any(getattr(n, "id", None) in ("ImportError", "ModuleNotFoundError") for n in names):
            return True
    return False


def imports_in(nodes) -> tuple[set[str], set[str], set[str]]:
    """(pgrpo modules, required third-party top-level names, optional ones) imported anywhere in ``nodes``."""
    known = modules()
    package, required, optional = set(), set(), set()

    def visit(node, guarded):
        if isinstance(node, ast.Try) and _catches_import_error(node):
            for child in node.body:
                visit(child, True)
            for child in [*node.handlers, *node.orelse, *node.finalbody]:
                visit(child, guarded)
            return
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
            if node.module.split(".")[0] == "pgrpo":
                names += [f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in known]
        for name in names:
            if name.split(".")[0] == "pgrpo":
                package.add(name)
            else:
                (optional if guarded else required).add(name.split(".")[0])
        for child in ast.iter_child_nodes(node):
            visit(child, guarded)

    for node in nodes:
        visit(node, False)
    return {m for m in package if m in known}, required, optional


COMMANDS = "pgrpo.stages.commands"


def command_modules() -> list[str]:
    """pgrpo.cli and the verbs' command modules: the code every `python -m pgrpo VERB` imports."""
    return ["pgrpo.cli", COMMANDS] + sorted(m for m in modules() if m.startswith(COMMANDS + "."))


def verb_handlers() -> dict[str, tuple[str, ast.FunctionDef]]:
    """verb -> (its command module, its handler): the 4th argument of ``commands.add(name, group, help, handler)``."""
    handlers = {}
    for module in command_modules()[2:]:
        functions = {n.name: n for n in parsed(module).body if isinstance(n, ast.FunctionDef)}
        for node in ast.walk(parsed(module)):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("add", "add_steps") and len(node.args) >= 4
                    and isinstance(node.args[0], ast.Constant) and isinstance(node.args[3], ast.Name)):
                handlers[node.args[0].value] = (module, functions[node.args[3].id])
    return handlers


def cli_functions_run_by(module: str, handler: ast.FunctionDef) -> list[ast.FunctionDef]:
    """The handler and every function of its module or of pgrpo.stages.commands it calls by name."""
    functions = {n.name: n for m in (COMMANDS, module) for n in parsed(m).body if isinstance(n, ast.FunctionDef)}
    seen, todo = set(), [handler.name]
    while todo:
        name = todo.pop()
        if name in seen or name not in functions:
            continue
        seen.add(name)
        todo += [c.func.id for c in ast.walk(functions[name]) if isinstance(c, ast.Call)
                 and isinstance(c.func, ast.Name)]
    return [functions[n] for n in sorted(seen)]


@cache
def verb_imports(verb: str) -> tuple[frozenset[str], frozenset[str], dict[str, str]]:
    """(required, optional) top-level third-party names of ``python -m pgrpo VERB``, and where each comes from."""
    module, handler = verb_handlers()[verb]
    light = command_modules()
    top = [n for m in light for n in parsed(m).body if not isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    package, required, optional = imports_in(top + cli_functions_run_by(module, handler))
    origin = {name: module for name in required | optional}
    seen, todo = set(light), sorted((package - set(light)) | {"pgrpo", "pgrpo.__main__"})
    while todo:
        name = todo.pop()
        parts = name.split(".")
        for i in range(1, len(parts) + 1):  # a module's parent packages are imported first
            mod = ".".join(parts[:i])
            if mod in seen or mod not in modules():
                continue
            seen.add(mod)
            more, req, opt = imports_in(parsed(mod).body)
            for n in (req | opt) - set(origin):
                origin[n] = mod
            required |= req
            optional |= opt
            todo += sorted(more - seen)
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    return frozenset(required - stdlib), frozenset((optional - required) - stdlib), origin


@cache
def installed_distributions() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()


def distribution(import_name: str) -> str:
    if import_name in DISTRIBUTION_OF:
        return DISTRIBUTION_OF[import_name]
    found = installed_distributions().get(import_name)
    if not found:
        raise LookupError(f"no installed distribution provides `import {import_name}`: add it to DISTRIBUTION_OF")
    return normalise(found[0])


# ------------------------------------------------------------------------------------------------ tests


def test_the_rule_parser_sees_every_rule():
    found = rules()
    declared = {m for p in RULES.glob("*.smk") for m in re.findall(r"^(?:rule|checkpoint) (\w+):", p.read_text(), re.M)}
    assert set(found) == declared and {"train", "evaluate", "verify_symbolic", "kref_train"} <= declared
    assert found["train"]["verb"] == "train" and found["train"]["launcher"]
    assert found["bandit_calibrate"]["verb"] == "bandit" and found["verify_symbolic"]["envs"] == ["symbolic"]


def test_the_import_reader_sees_function_level_and_guarded_imports():
    required, optional, origin = verb_imports("train")
    assert {"torch", "trl", "peft", "transformers", "datasets", "accelerate"} <= required  # all function-level
    assert "vllm" in required | optional and origin["trl"].startswith("pgrpo.")
    symbolic, _, _ = verb_imports("symbolic")
    assert "sympy" in symbolic and "torch" not in symbolic
    source = "import numpy\ndef f():\n    try:\n        import vllm\n    except ImportError:\n        import scipy\n"
    assert imports_in(ast.parse(source).body) == (set(), {"numpy", "scipy"}, {"vllm"})


def test_every_rule_runs_a_verb_in_an_env_that_exists():
    for name, rule in rules().items():
        if rule["conda"] is None:
            continue
        assert rule["envs"], f"rule {name}: conda {rule['conda']} names no envs/*.yaml"
        assert all((ENVS / f"{e}.yaml").exists() for e in rule["envs"]), (name, rule["envs"])
        assert rule["verb"] in verb_handlers(), f"rule {name}: its shell runs no known pgrpo verb ({rule['verb']})"


@pytest.mark.parametrize("name", sorted(env_names()))
def test_every_package_of_an_env_is_pinned(name):
    spec = env(name)
    assert spec["python"] == "3.11", f"envs/{name}.yaml: python=3.11 (what TRL 1.16 and vLLM 0.31 both take)"
    assert not spec["unpinned"], f"envs/{name}.yaml: not pinned with ==: {spec['unpinned']}"


def _rule_params():
    return [pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=PENDING_RULE_CHANGES[name]))
            if name in PENDING_RULE_CHANGES else name for name, rule in sorted(rules().items()) if rule["conda"]]


@pytest.mark.parametrize("rule_name", _rule_params())
def test_each_rule_env_pins_what_its_verb_imports(rule_name):
    rule = rules()[rule_name]
    required, _, origin = verb_imports(rule["verb"])
    needed = {distribution(n): n for n in required if n not in OPTIONAL}
    if rule["launcher"]:  # `accelerate launch` with config/accelerate/deepspeed_*.yaml on several GPUs
        needed |= {"accelerate": "accelerate launch", "deepspeed": "config/accelerate/deepspeed_zero*.yaml"}
    for env_name in rule["envs"]:
        pins = env(env_name)["pins"]
        missing = {dist: f"{imp} (from {origin.get(imp, imp)})" for dist, imp in needed.items() if dist not in pins}
        assert not missing, f"rule {rule_name} -> envs/{env_name}.yaml -> pgrpo {rule['verb']}: not pinned: {missing}"


def test_gpu_rules_can_take_the_vllm_envs():
    table = rules()
    for rule_name, vllm_env in (("train", "train-vllm"), ("kref_train", "train-vllm"), ("evaluate", "evaluate-vllm")):
        assert vllm_env in table[rule_name]["envs"], (rule_name, table[rule_name]["conda"])
    used = {e for rule in table.values() for e in rule["envs"]}
    assert used == set(env_names()), f"envs no rule uses: {set(env_names()) - used}"


def test_vllm_envs_pin_vllm_and_otherwise_match_their_base():
    for name, (base, changes) in VLLM_ENVS.items():
        pins, base_pins = env(name)["pins"], env(base)["pins"]
        assert "vllm" in pins and "vllm" in OPTIONAL
        expected = {**base_pins, **changes}
        assert pins == expected, f"envs/{name}.yaml differs from envs/{base}.yaml beyond {changes}"


def test_cuda12_variants_differ_from_their_cuda13_env_only_in_the_cuda_builds():
    """Every GPU env has a CUDA 12 variant whose pins are its own but for torch (and vLLM) built for CUDA 12.9, taken
    from the wheel indexes it adds; the CUDA 13 envs take everything from PyPI."""
    gpu_envs = {"train", "train-vllm", "evaluate", "evaluate-vllm"}
    assert {base for base, _, _ in CUDA12_ENVS.values()} == gpu_envs
    assert set(env_names()) == {"analysis", "symbolic"} | gpu_envs | set(CUDA12_ENVS)
    for name, (base, changes, options) in CUDA12_ENVS.items():
        pins, base_pins = env(name)["pins"], env(base)["pins"]
        assert pins == {**base_pins, **changes}, f"envs/{name}.yaml differs from envs/{base}.yaml beyond {changes}"
        assert all(pins[d].split("+")[0] == base_pins[d] and pins[d].endswith("+cu129") for d in changes)
        assert env(name)["options"] == options and not env(base)["options"]
        assert env(name)["python"] == env(base)["python"]


def test_the_cuda_key_picks_the_gpu_envs():
    """software.cuda picks the env of every GPU rule: a dry run's conda envs are the CUDA 12 files exactly with "12"."""
    source = smk_functions()["train_env"] + smk_functions()["evaluate_env"]
    for name in CUDA12_ENVS:
        assert f"envs/{name}.yaml" in source, name
    functions = smk_functions()

    def envs_for(cuda, use_vllm, backend):
        namespace = {"config": {"software": {"cuda": cuda}, "training": {"use_vllm": use_vllm}, "kref_sweep": {},
                                "evaluation": {"backend": backend, "resources": {"gpus": 1}}}}
        for name in ("software_cuda", "train_env", "evaluate_env"):
            exec(functions[name], namespace)
        return namespace["train_env"](), namespace["evaluate_env"]()

    assert envs_for("13", False, "hf") == ("../../envs/train.yaml", "../../envs/evaluate.yaml")
    assert envs_for("12", False, "hf") == ("../../envs/train-cu12.yaml", "../../envs/evaluate-cu12.yaml")
    assert envs_for("12", True, "vllm") == ("../../envs/train-vllm-cu12.yaml", "../../envs/evaluate-vllm-cu12.yaml")
    assert envs_for("13", True, "auto") == ("../../envs/train-vllm.yaml", "../../envs/evaluate-vllm.yaml")


def test_pins_are_the_versions_the_tests_run_with():
    """Every pin of a non-vLLM env is the installed version here, and a package has one version in all of them."""
    seen: dict[str, tuple[str, str]] = {}
    for name in env_names():
        if name in VLLM_ENVS or name in CUDA12_ENVS:
            continue
        for dist, version in env(name)["pins"].items():
            if dist in seen:
                assert seen[dist][1] == version, f"{dist}: {version} in envs/{name}.yaml, {seen[dist]} elsewhere"
            seen[dist] = (name, version)
            try:
                installed = importlib.metadata.version(dist)
            except importlib.metadata.PackageNotFoundError:
                assert dist in NOT_IN_TEST_VENV, f"{dist} (envs/{name}.yaml) is not installed in the test env"
                continue
            assert installed.split("+")[0] == version, f"envs/{name}.yaml pins {dist}=={version}, tests run {installed}"


# ------------------------------------------------------------------------------------------------ resolution

#: The wheels-only rule's exceptions: distributions PyPI has as source archives only.
SOURCE_ONLY = ("deepspeed",)


def pip_environment() -> dict:
    """This process's environment without the machine's pip configuration (constraints, local wheel folders)."""
    drop = ("PIP_FIND_LINKS", "PIP_CONSTRAINT", "PIP_NO_INDEX", "PIP_REQUIREMENT")
    environment = {k: v for k, v in os.environ.items() if k not in drop}
    environment["PIP_CONFIG_FILE"] = os.devnull  # no pip.conf at all (global ones included)
    return environment


def resolve(name: str, tmp_dir: Path) -> tuple[int, str, dict | None]:
    requirements = tmp_dir / f"{name}.txt"
    requirements.write_text("\n".join(env(name)["pip"]) + "\n")
    report = tmp_dir / f"{name}.json"
    command = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet", "--no-input",
               "--disable-pip-version-check", "--only-binary", ":all:", "--no-binary", ",".join(SOURCE_ONLY),
               "--report", str(report), "-r", str(requirements)]
    try:
        done = subprocess.run(command, env=pip_environment(), capture_output=True, text=True, timeout=600,
                              check=False)
    except subprocess.TimeoutExpired:
        return 124, f"pip took over 600 s to resolve envs/{name}.yaml", None
    return done.returncode, done.stdout + done.stderr, json.loads(report.read_text()) if report.exists() else None


@pytest.fixture(scope="module")
def resolutions(tmp_path_factory):
    """Every env resolved once, in parallel (network-bound)."""
    tmp_dir = tmp_path_factory.mktemp("resolve")
    names = [n for n in env_names() if env(n)["python"] == f"{sys.version_info.major}.{sys.version_info.minor}"
             and not unreachable_indexes(n)]
    with ThreadPoolExecutor(max_workers=3) as pool:
        return dict(zip(names, pool.map(lambda n: resolve(n, tmp_dir), names)))


def unreachable_indexes(name: str) -> list[str]:
    """The extra wheel indexes of envs/NAME.yaml (the CUDA 12 variants': PyTorch's and vLLM's) whose host does not
    resolve from here: a machine that reaches PyPI alone cannot resolve those envs."""
    import socket
    from urllib.parse import urlparse

    hosts = [urlparse(line.split()[-1]).hostname for line in env(name)["pip"] if line.startswith("--extra-index-url")]
    unreachable = []
    for host in hosts:
        try:
            socket.getaddrinfo(host, 443)
        except OSError:
            unreachable.append(host)
    return unreachable


@pytest.mark.slow
@pytest.mark.envs
@pytest.mark.parametrize("name", sorted(env_names()))
def test_env_resolves_with_pip(name, resolutions):
    if unreachable_indexes(name):
        pytest.skip(f"envs/{name}.yaml needs the wheel index of {', '.join(unreachable_indexes(name))}, which this "
                    "machine cannot reach (its pins and its sameness with the CUDA 13 env are checked above)")
    if name not in resolutions:
        pytest.skip(f"envs/{name}.yaml is for python {env(name)['python']}, this is {sys.version.split()[0]}")
    code, output, report = resolutions[name]
    assert code == 0 and report, f"envs/{name}.yaml does not resolve:\n{output[-3000:]}"
    resolved = {normalise(item["metadata"]["name"]): item["metadata"]["version"] for item in report["install"]}
    for dist, version in env(name)["pins"].items():
        assert resolved.get(dist) == version, f"envs/{name}.yaml: {dist}=={version} resolved as {resolved.get(dist)}"
