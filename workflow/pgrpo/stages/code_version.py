"""The version of the package code a ``pgrpo`` verb runs, as a digest: the analysis rules' ``code`` param.

Snakemake re-runs a job when its rule's own code, params, inputs or conda env change (its ``rerun-triggers``), not
when a module its command imports changes. Each CPU rule downstream of training therefore passes
``code_digest(VERBS[verb])`` as a param: a change to the code its command runs changes the param, and Snakemake re-runs
the job ("params have changed") and what reads its outputs. Training, evaluation and the jobs that decide them (the
tiny model, the synthetic data, the K_ref grid) take no such param, so a refactor never re-trains: their reruns stay
with the config keys that shape them (``training_config.trajectory_section``).

The code of a verb is read from the source with :mod:`ast`, never imported:

- in the module that defines the verb's handler (``pgrpo.stages.commands.<stage>``): its module-level statements
  other than functions, the handler, ``add_commands`` (the verb's arguments and their defaults) and the module's
  functions they name, transitively, but not the handlers of the module's other verbs;
- then every ``pgrpo`` module those import, function-level imports included, transitively, each whole; a string
  naming a ``pgrpo`` module counts as an import of it (``importlib.import_module("pgrpo.live.callback")``), and a
  package's ``__init__`` counts whenever a module under it does (Python runs it first).

Each part is hashed as its syntax tree without docstrings (``ast.dump``, no line numbers), so an edit of a comment,
a docstring or the layout changes nothing; a change to a statement, a name or a constant does. Python files only:
data files a stage reads are the rule's inputs. The modules' hashes are kept between processes in a cache file
(:class:`ModuleCache`, keyed by each file's path, mtime and size), so the workflow parses only the files that changed.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import json
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

PACKAGE = "pgrpo"
#: the directory of the ``pgrpo`` package (workflow/pgrpo)
PACKAGE_DIR = Path(__file__).resolve().parents[1]
#: the function of a command module that registers its verbs and their arguments: part of every verb's code
REGISTRAR = "add_commands"
DIGEST_CHARS = 16


def module_file(name: str, package_dir: Path = PACKAGE_DIR) -> Path | None:
    """The source file of the ``pgrpo`` module ``name`` (a package's ``__init__.py``), or None if there is none."""
    parts = name.split(".")
    if parts[0] != PACKAGE:
        return None
    base = package_dir.joinpath(*parts[1:])
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    path = base.with_suffix(".py")
    return path if len(parts) > 1 and path.is_file() else None


def _with_parents(name: str) -> list[str]:
    """``pgrpo.a.b`` -> [pgrpo, pgrpo.a, pgrpo.a.b]: importing a module runs every package above it."""
    parts = name.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def imported_modules(nodes: Iterable[ast.AST], module: str, is_package: bool,
                     package_dir: Path = PACKAGE_DIR) -> set[str]:
    """The ``pgrpo`` modules the statements ``nodes`` of ``module`` import anywhere inside them."""
    found: set[str] = set()
    for top in nodes:
        for node in ast.walk(top):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # relative: from the module's package, up level - 1 more
                    anchor = module.split(".") if is_package else module.split(".")[:-1]
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join(anchor + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                found.add(base)
                found.update(f"{base}.{alias.name}" for alias in node.names)  # a submodule, if it is one
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith(PACKAGE):
                found.add(node.value)
    modules = {parent for name in found for parent in _with_parents(name)}
    return {name for name in modules if module_file(name, package_dir) is not None}


def _without_docstrings(tree: ast.AST) -> ast.AST:
    """The tree with each module, class and function docstring removed (in place)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return tree


def _parse(path: Path) -> ast.Module:
    """The module's syntax tree without its docstrings (what is hashed)."""
    return _without_docstrings(ast.parse(path.read_text(), filename=str(path)))


def _dump(nodes: Iterable[ast.AST]) -> str:
    return "\n".join(ast.dump(node) for node in nodes)


def registered_handlers(tree: ast.Module) -> set[str]:
    """The names of the handlers ``add_commands`` registers (``commands.add(NAME, GROUP, HELP, HANDLER)``)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("add", "add_steps"):
            handler = node.args[3] if len(node.args) >= 4 else next(
                (k.value for k in node.keywords if k.arg == "handler"), None)
            if isinstance(handler, ast.Name):
                names.add(handler.id)
    return names


def _reachable_functions(tree: ast.Module, roots: Iterable[str], exclude: set[str] = frozenset()) -> list[ast.AST]:
    """The module-level functions and classes of ``tree`` named ``roots`` and those they name, transitively, never
    through a name in ``exclude``."""
    defined = {node.name: node for node in tree.body
               if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name not in exclude}
    todo = [name for name in roots if name in defined]
    seen: dict[str, ast.AST] = {}
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen[name] = defined[name]
        todo += [n.id for n in ast.walk(defined[name]) if isinstance(n, ast.Name) and n.id in defined]
    return [seen[name] for name in sorted(seen)]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class ModuleCache:
    """Each whole module's hash and imports, keyed by its file's path, mtime and size, kept in a JSON file between
    processes (``path`` None: in memory only), so that parsing the workflow does not parse the package again."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else None
        self.entries: dict[str, dict[str, Any]] = {}
        self.changed = False
        if self.path is not None and self.path.is_file():
            try:
                loaded = json.loads(self.path.read_text())
                self.entries = loaded if isinstance(loaded, dict) else {}
            except (OSError, ValueError):  # a damaged cache is rebuilt
                self.entries = {}

    def module(self, name: str, package_dir: Path) -> tuple[str, set[str]]:
        """The hash of the module's normalised code and the modules it imports (parsed only when its file changed)."""
        path = module_file(name, package_dir)
        stat = path.stat()
        key = str(path.resolve())
        entry = self.entries.get(key)
        if not (isinstance(entry, dict) and entry.get("mtime_ns") == stat.st_mtime_ns
                and entry.get("size") == stat.st_size):
            tree = _parse(path)
            imports = imported_modules(tree.body, name, path.name == "__init__.py", package_dir) - {name}
            entry = {"mtime_ns": stat.st_mtime_ns, "size": stat.st_size, "hash": _sha(_dump([tree])),
                     "imports": sorted(imports)}
            self.entries[key] = entry
            self.changed = True
        return entry["hash"], set(entry["imports"])

    def save(self) -> None:
        if self.path is not None and self.changed:
            from pgrpo.atomic import write_text

            write_text(self.path, json.dumps(self.entries, sort_keys=True))
            self.changed = False


def entry_parts(module: str, function: str, package_dir: Path = PACKAGE_DIR) -> tuple[str, set[str]]:
    """The part of ``module`` that running ``function`` (a verb's handler) can reach, normalised, and what it imports."""
    path = module_file(module, package_dir)
    tree = _parse(path)
    statements = [node for node in tree.body
                  if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    roots = [function, REGISTRAR] + [n.id for s in statements for n in ast.walk(s) if isinstance(n, ast.Name)]
    other_verbs = registered_handlers(tree) - {function}  # add_commands names every verb's handler: not theirs
    reachable = statements + _reachable_functions(tree, roots, exclude=other_verbs)
    imports = imported_modules(reachable, module, path.name == "__init__.py", package_dir) - {module}
    return _dump(reachable), imports


def code_closure(module: str, function: str, package_dir: Path = PACKAGE_DIR,
                 cache: ModuleCache | None = None) -> dict[str, str]:
    """{module: the hash of its normalised code} of everything running ``module.function`` can import, the entry
    module's reachable part under its own name."""
    cache = cache or ModuleCache()
    entry, todo = entry_parts(module, function, package_dir)
    code = {module: _sha(entry)}
    todo = sorted(todo)
    while todo:
        name = todo.pop()
        if name in code:
            continue
        code[name], imports = cache.module(name, package_dir)
        todo += sorted(imports - set(code))
    return code


def digest_of(code: dict[str, str]) -> str:
    """sha256 over the modules' hashes in name order, ``DIGEST_CHARS`` hex digits."""
    sha = hashlib.sha256()
    for name in sorted(code):
        sha.update(name.encode() + b"\0" + code[name].encode() + b"\0")
    return sha.hexdigest()[:DIGEST_CHARS]


def code_digest(handler: Callable[..., Any], package_dir: Path = PACKAGE_DIR,
                cache: ModuleCache | None = None) -> str:
    """The digest of the code a verb's ``handler`` (``pgrpo.cli.VERBS[verb]``) runs."""
    function = inspect.unwrap(handler)
    return digest_of(code_closure(function.__module__, function.__name__, package_dir, cache))


def code_digests(handlers: Mapping[str, Callable[..., Any]], cache_file: str | Path | None = None,
                 package_dir: Path = PACKAGE_DIR) -> dict[str, str]:
    """{verb: its digest} for every verb of ``handlers``, with the modules' hashes kept in ``cache_file``."""
    cache = ModuleCache(cache_file)
    digests = {verb: code_digest(handler, package_dir, cache) for verb, handler in handlers.items()}
    cache.save()
    return digests
