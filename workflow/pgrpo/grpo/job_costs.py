"""Where the main job's time goes (issue 24): job-seconds per job and per rule, their shares, and the critical path.

Not a paper equation: the cost of running the paper's pipeline. The inputs are the jobs of the workflow's DAG
(each with its rule, the files it reads and writes, and the wall-clock seconds its Snakemake ``benchmark:`` file
measured); a job depends on another when it reads a file (or a file inside a directory) that the other writes.

* job-seconds: the sum of the jobs' wall-clock seconds (what the run costs in core-time on a machine whose jobs
  each use one core); each job's and each rule's share of it;
* the critical path: the chain of dependent jobs with the largest summed seconds (the longest path of the DAG
  weighted by seconds); no number of cores runs the job in less. With ``cores`` cores the run takes at least
  ``max(critical path, job-seconds / cores)``.
* jobs a checkpoint adds (Snakemake re-evaluates the DAG once a checkpoint's output exists, so the DAG written when
  the run started lacks them): found by their benchmark files, matched to their rule's benchmark pattern
  (:func:`jobs_added_by_checkpoints`); such a job reads the checkpoint output its wildcards name, and the jobs that
  read that output read the added job's outputs too (Snakemake's checkpoint semantics: the consumer's input function
  waits on the checkpoint, then asks for the jobs it adds).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from graphlib import CycleError, TopologicalSorter
from typing import Callable, Mapping, Sequence


@dataclass(frozen=True)
class Job:
    """One job of the DAG: ``name`` (its benchmark file relative to the benchmarks folder, without ``.tsv``),
    ``rule``, the wall-clock ``seconds`` it took (None: not measured), the files it reads and writes."""

    name: str
    rule: str
    seconds: float | None
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    planned_seconds: float | None = None


@dataclass(frozen=True)
class JobCost:
    name: str
    rule: str
    seconds: float
    share: float  # of the total job-seconds
    on_critical_path: bool
    planned_seconds: float | None


@dataclass(frozen=True)
class RuleCost:
    rule: str
    jobs: int
    seconds: float
    share: float
    max_seconds: float  # its slowest job


@dataclass(frozen=True)
class CostTable:
    """Jobs (slowest first) and rules (costliest first); ``critical_path``: job names, first to last."""

    jobs: tuple[JobCost, ...]
    rules: tuple[RuleCost, ...]
    total_seconds: float
    critical_path: tuple[str, ...]
    critical_path_seconds: float
    unmeasured: tuple[str, ...]  # jobs of the DAG with no benchmark file (not run, or failed)

    def wall_lower_bound(self, cores: int) -> float:
        """The least wall-clock a run on ``cores`` cores can take: ``max(critical path, job-seconds / cores)``."""
        if cores < 1:
            raise ValueError("cores must be >= 1")
        return max(self.critical_path_seconds, self.total_seconds / cores)


def _writer_of(path: str, by_output: dict[str, str]) -> str | None:
    """The job that writes ``path``, or a directory above it."""
    candidate = path.rstrip("/")
    while candidate:
        if candidate in by_output:
            return by_output[candidate]
        candidate = candidate.rpartition("/")[0]
    return None


def dependencies(jobs: Sequence[Job]) -> dict[str, set[str]]:
    """Per job name, the names of the jobs it reads from (a file they write, or a file inside a directory)."""
    names = [j.name for j in jobs]
    if len(set(names)) != len(names):
        duplicate = next(n for n in names if names.count(n) > 1)
        raise ValueError(f"two jobs share the name {duplicate!r}")
    by_output: dict[str, str] = {out.rstrip("/"): j.name for j in jobs for out in j.outputs}
    deps: dict[str, set[str]] = {}
    for job in jobs:
        writers = {_writer_of(path, by_output) for path in job.inputs}
        deps[job.name] = writers - {None, job.name}
    return deps


def critical_path(jobs: Sequence[Job]) -> tuple[tuple[str, ...], float]:
    """The chain of dependent jobs with the largest summed seconds (unmeasured jobs count 0), and that sum."""
    deps = dependencies(jobs)
    seconds = {j.name: float(j.seconds or 0.0) for j in jobs}
    try:
        order = list(TopologicalSorter(deps).static_order())
    except CycleError as err:
        raise ValueError(f"the jobs' files form a cycle: {err.args[1]}") from err
    finish: dict[str, float] = {}
    via: dict[str, str | None] = {}
    for name in order:
        best = max(deps[name], key=lambda d: (finish[d], d), default=None)
        finish[name] = seconds[name] + (finish[best] if best is not None else 0.0)
        via[name] = best
    if not finish:
        return (), 0.0
    position = {name: i for i, name in enumerate(order)}
    end = max(finish, key=lambda n: (finish[n], position[n]))  # on a tie, the chain that goes furthest
    path = [end]
    while via[path[-1]] is not None:
        path.append(via[path[-1]])
    return tuple(reversed(path)), finish[end]


def cost_table(jobs: Sequence[Job], exclude_rules: Sequence[str] = ()) -> CostTable:
    """The per-job and per-rule table of ``jobs``; jobs of ``exclude_rules`` (the table's own rule, ``all``) are
    kept for the DAG's edges but not counted."""
    path, path_seconds = critical_path(jobs)
    on_path = set(path)
    counted = [j for j in jobs if j.rule not in exclude_rules]
    measured = [j for j in counted if j.seconds is not None]
    total = float(sum(j.seconds for j in measured))

    def share(s: float) -> float:
        return s / total if total > 0 else 0.0

    job_rows = tuple(sorted((JobCost(j.name, j.rule, float(j.seconds), share(j.seconds), j.name in on_path,
                                     j.planned_seconds) for j in measured),
                            key=lambda c: (-c.seconds, c.name)))
    rules: dict[str, list[float]] = {}
    for j in measured:
        rules.setdefault(j.rule, []).append(float(j.seconds))
    rule_rows = tuple(sorted((RuleCost(rule, len(s), sum(s), share(sum(s)), max(s)) for rule, s in rules.items()),
                             key=lambda c: (-c.seconds, c.rule)))
    return CostTable(jobs=job_rows, rules=rule_rows, total_seconds=total,
                     critical_path=tuple(n for n in path if n in {j.name for j in counted}),
                     critical_path_seconds=path_seconds,
                     unmeasured=tuple(sorted(j.name for j in counted if j.seconds is None)))


@dataclass(frozen=True)
class RulePattern:
    """A rule as the DAG's start saw it: its benchmark and output file patterns (Snakemake wildcards ``{name}`` or
    ``{name,regex}``) and whether it is a checkpoint."""

    rule: str
    benchmark: str | None
    outputs: tuple[str, ...] = ()
    checkpoint: bool = False


_WILDCARD = re.compile(r"\{\s*(?P<name>\w+)\s*(?:,\s*(?P<constraint>(?:[^{}]+|\{\d+(?:,\d+)?\})*))?\s*\}")


def pattern_regex(pattern: str) -> re.Pattern:
    """The regular expression of a file pattern: a wildcard matches its constraint, else ``.+`` (as Snakemake's);
    a wildcard named twice must match the same text."""
    parts, seen, last = [], set(), 0
    for match in _WILDCARD.finditer(pattern):
        parts.append(re.escape(pattern[last:match.start()]))
        name = match.group("name")
        if name in seen:
            parts.append(f"(?P={name})")
        else:
            seen.add(name)
            parts.append(f"(?P<{name}>{match.group('constraint') or '.+'})")
        last = match.end()
    parts.append(re.escape(pattern[last:]))
    return re.compile("".join(parts) + r"\Z")


def match_pattern(pattern: str, path: str) -> dict[str, str] | None:
    """The wildcards with which ``pattern`` yields ``path``, or None."""
    found = pattern_regex(pattern).match(path)
    return None if found is None else found.groupdict()


def fill_pattern(pattern: str, wildcards: Mapping[str, str]) -> str | None:
    """``pattern`` with its wildcards filled in (constraints dropped); None when one of them is not given."""
    names = [m.group("name") for m in _WILDCARD.finditer(pattern)]
    if any(n not in wildcards for n in names):
        return None
    return _WILDCARD.sub(lambda m: str(wildcards[m.group("name")]), pattern)


def jobs_added_by_checkpoints(jobs: Sequence[Job], rules: Sequence[RulePattern], files: Mapping[str, float | None],
                              written_at: Mapping[str, float] | None = None,
                              name_of: Callable[[str], str] = str) -> tuple[list[Job], list[Job]]:
    """``(jobs, added)``: the DAG's ``jobs`` (the readers of a checkpoint's output now also reading the added jobs'
    outputs) and the jobs a checkpoint added, one per benchmark file of ``files`` (path -> seconds) that no job of
    ``jobs`` claims, that a non-checkpoint rule's benchmark pattern matches and whose wildcards name a checkpoint
    output of ``jobs``; each named ``name_of(path)``. Any other file is left out (not of this DAG).

    ``written_at`` (path -> epoch seconds, for the benchmark files and the checkpoints' outputs): where given, an
    added job counts only if its benchmark file is newer than the checkpoint output it reads (a cell of an earlier
    grid, whose checkpoint has since been rewritten, is not of this DAG)."""
    checkpoint_rules = {r.rule: r for r in rules if r.checkpoint}
    checkpoint_outputs = {out: j for j in jobs if j.rule in checkpoint_rules for out in j.outputs}
    added: list[Job] = []
    readers: dict[str, list[str]] = {}
    for path, seconds in sorted(files.items()):
        for rule in rules:
            if rule.checkpoint or not rule.benchmark:
                continue
            wildcards = match_pattern(rule.benchmark, path)
            if wildcards is None:
                continue
            reads = sorted({filled for c in checkpoint_rules.values() for pattern in c.outputs
                            if (filled := fill_pattern(pattern, wildcards)) in checkpoint_outputs})
            if not reads:
                break  # a job the DAG's start knew of would be in ``jobs``: this file is not of this DAG
            if written_at is not None and any(written_at.get(path, 0.0) < written_at.get(c, 0.0) for c in reads):
                break
            outputs = tuple(o for o in (fill_pattern(p, wildcards) for p in rule.outputs) if o)
            added.append(Job(name=name_of(path), rule=rule.rule, seconds=seconds, inputs=tuple(reads), outputs=outputs))
            for c in reads:
                readers.setdefault(c, []).extend(outputs)
            break
    widened = [j if not (more := [o for c in j.inputs if c in readers and j.rule not in checkpoint_rules
                                  for o in readers[c]]) else dataclasses.replace(j, inputs=j.inputs + tuple(more))
               for j in jobs]
    return widened, added
