"""A training job's console output read as a log history (beyond the paper: the quantities of Section 4.2 as a GRPO
job prints them, for ``pgrpo watch`` on a SLURM job's ``slurm-<id>.out`` while the run goes on, and for every reader
of a log).

Two layouts are read:

* **TRL** (and any ``transformers.Trainer``): each log is printed as a Python dict above the progress bar,
  ``{'loss': 0.01, 'grad_norm': 0.7, ..., 'reward': 0.41, 'kl': 0.002, 'epoch': 0.05}``, without its step. The step
  is the training progress bar's count (tqdm's ``10/400 [04:07<2:55:15, ...]``) last printed before the dict, the
  bar's total is the planned length; a log with no bar counts its entries (step 1, 2, ...) and says so. Dicts that
  are not logs (a printed config, the end-of-training summary with ``train_runtime``) are left out; a value printed
  as ``nan``, ``inf``, ``np.float64(x)`` or ``tensor(x)`` is read as its number.
* **verl**: one line per step, ``step:12 - critic/score/mean:0.41 - actor/entropy:0.52 - ...`` (Ray's ``(TaskRunner
  pid=...)`` prefix and colour codes allowed), or the same pairs one per line (`` - key:value``) with
  ``training/global_step`` among them. Its keys are renamed to TRL's where the quantity is the same
  (:data:`VERL_KEYS`): ``critic/score/mean`` is the reward (before any KL penalty in the reward), ``actor/kl_loss``
  the KL to the reference policy, the first validation mean (``val-core/<data>/<reward or acc>/mean@1``, older verl
  ``val/test_score/<data>``) the eval reward. ``Total training steps: N`` is the planned length.

:func:`parse_console_log` returns a :class:`ConsoleLog`; :mod:`pgrpo.stages.logs` reads the file.
"""

from __future__ import annotations

import ast
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

#: verl's metric names -> TRL's, where they measure the same thing (the first present wins for a TRL name)
VERL_KEYS: dict[str, str] = {
    "critic/score/mean": "reward",
    "critic/rewards/mean": "reward",
    "critic/score/max": "reward_max",
    "critic/score/min": "reward_min",
    "actor/entropy": "entropy",
    "actor/entropy_loss": "entropy",
    "actor/kl_loss": "kl",
    "actor/grad_norm": "grad_norm",
    "actor/pg_clipfrac": "clip_ratio",
    "response_length/mean": "completions/mean_length",
    "response_length/max": "completions/max_length",
    "response_length/min": "completions/min_length",
    "response_length/clip_ratio": "completions/clipped_ratio",
    "actor/lr": "learning_rate",
}

#: a verl validation mean: ``val-core/<data>/<reward|acc|score>/mean@1`` (verl >= 0.3) or ``val/test_score/<data>``
_VERL_EVAL = re.compile(r"^(val-core/.+/(reward|acc|score)/mean@1|val/test_score/.+)$")

#: keys whose presence marks a printed dict as a training or eval log (not a config, not a summary)
_LOG_KEYS = ("loss", "reward", "learning_rate", "grad_norm", "kl", "entropy")
_LOG_PREFIXES = ("rewards/", "eval_", "completions/")
#: the end-of-training summary TRL prints (its keys are not per-step quantities)
_SUMMARY_KEYS = frozenset({"train_runtime", "train_samples_per_second", "train_steps_per_second", "train_loss"})

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_BAR = re.compile(r"(?<![\d/])(\d+)/(\d+) \[")
_DICT_START = re.compile(r"\{'")
_VERL_STEP = re.compile(r"(?:^|[\s)>])step:(\d+) - (.*)$")
_VERL_LONE_STEP = re.compile(r"(?:^|[\s)>])step:(\d+)\s*-?\s*$")
_VERL_PAIR_LINE = re.compile(r"^\s*-\s+([^\s:][^:]*?):\s*(\S+)\s*$")
_VERL_TOTAL = re.compile(r"Total training steps:\s*(\d+)")
_NUMBER_IN = re.compile(r"^[A-Za-z_.][A-Za-z0-9_.]*\(\s*([-+0-9.eE]+|nan|inf|-inf)\s*(?:,.*)?\)$")
_NON_FINITE = {"nan": math.nan, "NaN": math.nan, "inf": math.inf, "Infinity": math.inf}


@dataclass
class ConsoleLog:
    """A console log as TRL's ``log_history`` (``history``: dicts with ``step``), its ``layout`` (``trl`` or
    ``verl``), where its steps come from (``step_source``: ``logged``, ``progress bar`` or ``entry count``), the
    planned length it prints (``max_steps``, or None), how many printed dicts were not logs (``skipped``) and notes
    for the user."""

    history: list[dict[str, Any]]
    layout: str
    step_source: str
    max_steps: int | None = None
    skipped: int = 0
    notes: list[str] = field(default_factory=list)


# ---- TRL: printed dicts ----------------------------------------------------------------------------------------


def _dict_end(text: str, start: int) -> int | None:
    """The index after the ``}`` closing the dict that opens at ``text[start]``, quotes and nesting respected; None
    where the line ends first (a dict cut by a crash or still being written)."""
    depth, quote, i = 0, None, start
    while i < len(text):
        char = text[i]
        if quote:
            if char == "\\":
                i += 2
                continue
            if char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char in "{[(":
            depth += 1
        elif char in "}])":
            depth -= 1
            if depth == 0:
                return i + 1
        elif char == "\n":
            return None
        i += 1
    return None


def _number(node: ast.AST) -> float | int | str | None:
    """A printed value: a number (``nan``, ``inf``, ``-x``, ``np.float64(x)``, ``tensor(x, device=...)`` included),
    a string, or None for anything else (a nested list or dict)."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, (int, float, str)) and not isinstance(node.value, bool) else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _number(node.operand)
        return -inner if isinstance(inner, (int, float)) and isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.Name) and node.id in _NON_FINITE:
        return _NON_FINITE[node.id]
    if isinstance(node, ast.Call) and node.args:  # np.float64(0.5), tensor(0.5, device='cuda:0'), float('nan')
        inner = _number(node.args[0])
        if isinstance(inner, str):
            try:
                return float(inner)
            except ValueError:
                return None
        return inner
    return None


def parse_printed_dict(literal: str) -> dict[str, Any] | None:
    """A dict as Python prints it, its values read by :func:`_number`; None where it is not one."""
    try:
        node = ast.parse(literal.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError):
        return None
    if not isinstance(node, ast.Dict):
        return None
    out: dict[str, Any] = {}
    for key, value in zip(node.keys, node.values):
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            number = _number(value)
            if number is not None:
                out[key.value] = number
    return out


def _is_log(entry: dict[str, Any]) -> bool:
    if _SUMMARY_KEYS & entry.keys():
        return False
    return any(isinstance(v, (int, float)) and (k in _LOG_KEYS or k.startswith(_LOG_PREFIXES))
               for k, v in entry.items())


def _trl_log(text: str) -> ConsoleLog | None:
    found: list[tuple[int, dict[str, Any]]] = []
    skipped = 0
    for match in _DICT_START.finditer(text):
        line_end = text.find("\n", match.start())
        line = text[match.start():len(text) if line_end < 0 else line_end].rstrip()
        entry = parse_printed_dict(line) if line.endswith("}") else None  # the usual case: the dict ends its line
        if entry is None:
            end = _dict_end(text, match.start())
            entry = parse_printed_dict(text[match.start():end]) if end is not None else None
        if entry is None:
            continue
        if _is_log(entry):
            found.append((match.start(), entry))
        else:
            skipped += 1
    if not found:
        return None
    bars = [(m.start(), int(m[1]), int(m[2])) for m in _BAR.finditer(text)]
    before_first = [b for b in bars if b[0] < found[0][0]]
    total = before_first[-1][2] if before_first else (Counter(b[2] for b in bars).most_common(1)[0][0] if bars
                                                      else None)
    train_bars = [b for b in bars if b[2] == total]
    notes: list[str] = []
    if all("step" in entry for _, entry in found):
        history, source = [entry for _, entry in found], "logged"
    elif train_bars:
        history, source, position = [], "progress bar", 0
        for at, entry in found:
            while position < len(train_bars) and train_bars[position][0] < at:
                position += 1
            count = train_bars[position - 1][1] if position else 0
            history.append({**entry, "step": count})
        steps = [h["step"] for h in history if not _is_eval(h)]
        if any(b <= a for a, b in zip(steps, steps[1:])) or (steps and steps[0] == 0):
            # stdout buffered, stderr (the bar) not: a dict reaches the file after the bar has moved on, so the bar
            # bounds its step from above; the k-th training log is at k x every, every the most the bounds allow
            every = min((count // k for k, count in enumerate(steps, 1) if count), default=0)
            if every >= 1:
                notes.append(f"the logs reach the file after the progress bar has moved on (stdout buffered): step "
                             f"k x {every} for the k-th training log, {every} the logging interval the bar allows")
            else:
                notes.append("the progress bar's counts do not place the logs: steps are counted in logged entries "
                             "(1, 2, ...), not optimizer steps")
            history, source = _counted(found, max(every, 1)), "entry count"
    else:
        history, source = _counted(found, 1), "entry count"
        notes.append("no progress bar in the log: steps are counted in logged entries (1, 2, ...), not optimizer "
                     "steps")
    return ConsoleLog(history, "trl", source, total, skipped, notes)


def _is_eval(entry: dict[str, Any]) -> bool:
    return any(k.startswith("eval_") for k in entry)


def _counted(found: list[tuple[int, dict[str, Any]]], every: int) -> list[dict[str, Any]]:
    """Steps ``every``, ``2 every``, ... for the training logs; an eval log takes the step of the log before it."""
    out, step = [], 0
    for _, entry in found:
        if not _is_eval(entry) or step == 0:
            step += every
        out.append({**entry, "step": step})
    return out


# ---- verl: step lines ------------------------------------------------------------------------------------------


def _verl_value(text: str) -> float | None:
    text = text.strip()
    inner = _NUMBER_IN.match(text)
    if inner:
        text = inner[1]
    try:
        return float(text)
    except ValueError:
        return None


def _verl_pairs(items: list[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in items:
        key, sep, value = item.strip().rpartition(":")
        number = _verl_value(value) if sep else None
        if key and number is not None:
            out[key.strip()] = number
    return out


def _verl_log(text: str) -> ConsoleLog | None:
    raw: list[dict[str, float]] = []
    block: dict[str, float] = {}

    def flush() -> None:
        if block:
            raw.append(dict(block))
        block.clear()

    lines = _ANSI.sub("", text).replace("\r", "\n").split("\n")
    for line in lines[:-1]:  # the last is empty, or a line still being written (its last value may be cut short)
        one_line = _VERL_STEP.search(line)
        entry = _verl_pairs(one_line[2].split(" - ")) if one_line else {}
        if entry:
            flush()
            raw.append({**entry, "step": float(one_line[1])})
        elif lone := _VERL_LONE_STEP.search(line):
            flush()
            block["step"] = float(lone[1])  # "step:N" alone: its pairs follow, one per line
        elif (pair := _VERL_PAIR_LINE.match(line)) and (number := _verl_value(pair[2])) is not None:
            block[pair[1].strip()] = number
        else:
            flush()
    flush()
    history = []
    for entry in raw:
        step = entry.get("step", entry.get("training/global_step"))
        if step is not None and any(k in VERL_KEYS or _VERL_EVAL.match(k) for k in entry):
            history.append(_verl_renamed(entry, int(step)))
    if not history:
        return None
    totals = _VERL_TOTAL.findall(text)
    return ConsoleLog(history, "verl", "logged", int(totals[-1]) if totals else None)


def _verl_renamed(entry: dict[str, float], step: int) -> dict[str, Any]:
    """A verl step's metrics under TRL's names (:data:`VERL_KEYS`; the first validation mean as ``eval_reward``),
    its other keys kept as they are."""
    out: dict[str, Any] = {"step": step}
    for key, value in entry.items():
        if key in ("step", "training/global_step"):
            continue
        name = VERL_KEYS.get(key)
        if name is None and _VERL_EVAL.match(key) and "eval_reward" not in out:
            name = "eval_reward"
        if name is not None and name not in out:
            out[name] = value
        elif name is None:
            out[key] = value
    return out


def parse_console_log(text: str) -> ConsoleLog | None:
    """The log history of a console log in TRL's or verl's layout (the module docstring); None where ``text`` holds
    neither a TRL log dict nor a verl step line."""
    return _verl_log(text) or _trl_log(text)
