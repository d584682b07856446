"""The shipped synthetic GSM8K-style word problems of the embedded default ("Ann has 7 apples. She buys 3 more.
...", gold ``#### N``): difficulty settings, seeded generation, disjoint splits.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Iterable

from pgrpo.errors import InputError

NAMES = [
    ("Ann", "she"), ("Ben", "he"), ("Cara", "she"), ("Dan", "he"), ("Eve", "she"), ("Finn", "he"),
    ("Gail", "she"), ("Hugo", "he"), ("Iris", "she"), ("Jack", "he"), ("Kim", "she"), ("Leo", "he"),
    ("Mia", "she"), ("Ned", "he"), ("Olga", "she"), ("Paul", "he"), ("Rosa", "she"), ("Sam", "he"),
    ("Tina", "she"), ("Victor", "he"),
]


ITEMS = ["apples", "books", "coins", "pens", "marbles", "stickers", "cards", "shells", "eggs", "cookies",
         "stamps", "toys", "beads", "plums", "rocks", "cups"]


PHRASES = {
    "add": ["{p} buys {k} more.", "{p} finds {k} more.", "{p} gets {k} more.", "{p} wins {k} more."],
    "sub": ["{p} gives away {k}.", "{p} loses {k}.", "{p} sells {k}.", "{p} eats {k}."],
    "mul": ["{p} then has {k} times as many.", "{p} makes the pile {k} times as big."],
}


SYMBOL = {"add": "+", "sub": "-", "mul": "*"}


DEFAULT_SYNTHETIC: dict[str, Any] = {
    "seed": 1234,
    "sizes": {"sft": 20000, "val": 200, "train": 4000, "test": 500, "ood": 300},
    "difficulty": {"min_ops": 1, "max_ops": 2, "start_max": 20, "operand_max": 10, "mul_max": 3,
                   "ops": ["add", "sub", "mul"]},
    # the out-of-distribution benchmark of the embedded default (Table 1's role): one more operation than
    # training ever shows; keys not given here are taken from `difficulty`
    "ood_difficulty": {"min_ops": 3, "max_ops": 3},
}


@dataclass(frozen=True)
class Problem:
    """One synthetic problem: the question text, the gold worked solution (``... #### N``) and its parts."""

    question: str
    answer: str
    start: int
    steps: tuple[tuple[str, int], ...]  # (operation, operand)
    result: int


def apply_op(op: str, a: int, b: int) -> int:
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    raise InputError(f"synthetic.difficulty.ops: unknown operation {op!r} (use add, sub, mul)")


def _check_difficulty(d: dict) -> None:
    for key in ("min_ops", "max_ops", "start_max", "operand_max", "mul_max"):
        if not isinstance(d.get(key), int) or d[key] < 1:
            raise InputError(f"synthetic.difficulty.{key} must be a positive integer, got {d.get(key)!r}")
    if d["min_ops"] > d["max_ops"]:
        raise InputError(f"synthetic.difficulty.max_ops ({d['max_ops']}) is below min_ops ({d['min_ops']})")
    if d["mul_max"] < 2 and "mul" in d["ops"]:
        raise InputError("synthetic.difficulty.mul_max must be at least 2 when 'mul' is among the ops")
    if not d["ops"] or any(op not in SYMBOL for op in d["ops"]):
        raise InputError(f"synthetic.difficulty.ops must be a non-empty subset of {list(SYMBOL)}, got {d['ops']!r}")


def sample_problem(rng: random.Random, difficulty: dict) -> Problem:
    """Draw one problem. Quantities stay non-negative: a subtraction never takes more than there is."""
    name, pronoun = rng.choice(NAMES)
    items = rng.choice(ITEMS)
    start = rng.randint(1, difficulty["start_max"])
    n_ops = rng.randint(difficulty["min_ops"], difficulty["max_ops"])
    value, steps, sentences, lines = start, [], [], []
    for _ in range(n_ops):
        ops = [op for op in difficulty["ops"] if not (op == "sub" and value < 1)]
        op = rng.choice(ops)
        if op == "add":
            k = rng.randint(1, difficulty["operand_max"])
        elif op == "sub":
            k = rng.randint(1, min(value, difficulty["operand_max"]))
        else:
            k = rng.randint(2, difficulty["mul_max"])
        new = apply_op(op, value, k)
        sentences.append(rng.choice(PHRASES[op]).format(p=pronoun.capitalize(), k=k))
        lines.append(f"{value}{SYMBOL[op]}{k}={new}")
        steps.append((op, k))
        value = new
    question = f"{name} has {start} {items}. " + " ".join(sentences) + f" How many {items} does {name} have?"
    answer = "\n".join(lines) + f"\n#### {value}"
    return Problem(question=question, answer=answer, start=start, steps=tuple(steps), result=value)


def synthetic_settings(cfg: dict | None) -> dict:
    """The ``synthetic:`` config merged over :data:`DEFAULT_SYNTHETIC` (one level deep), validated."""
    cfg = cfg or {}
    merged = {
        "seed": cfg.get("seed", DEFAULT_SYNTHETIC["seed"]),
        "sizes": {**DEFAULT_SYNTHETIC["sizes"], **(cfg.get("sizes") or {})},
        "difficulty": {**DEFAULT_SYNTHETIC["difficulty"], **(cfg.get("difficulty") or {})},
    }
    merged["ood_difficulty"] = {**merged["difficulty"], **DEFAULT_SYNTHETIC["ood_difficulty"],
                                **(cfg.get("ood_difficulty") or {})}
    if not isinstance(merged["seed"], int):
        raise InputError(f"synthetic.seed must be an integer, got {merged['seed']!r}")
    unknown = set(cfg) - set(DEFAULT_SYNTHETIC)
    if unknown:
        raise InputError(f"synthetic: unknown key(s) {sorted(unknown)} (known: {sorted(DEFAULT_SYNTHETIC)})")
    for split, n in merged["sizes"].items():
        if split not in DEFAULT_SYNTHETIC["sizes"]:
            raise InputError(f"synthetic.sizes.{split}: unknown split (use {', '.join(DEFAULT_SYNTHETIC['sizes'])})")
        if not isinstance(n, int) or n < 0:
            raise InputError(f"synthetic.sizes.{split} must be a non-negative integer, got {n!r}")
    _check_difficulty(merged["difficulty"])
    _check_difficulty(merged["ood_difficulty"])
    return merged


def generate_problems(n: int, difficulty: dict, seed: int, exclude: Iterable[str] = ()) -> list[Problem]:
    """``n`` distinct problems (by question text), none of whose questions is in ``exclude``; deterministic in seed."""
    _check_difficulty(difficulty)
    rng = random.Random(seed)
    seen = set(exclude)
    out: list[Problem] = []
    misses, max_misses = 0, 5000  # consecutive duplicates before declaring the problem space exhausted
    while len(out) < n:
        if misses > max_misses:
            raise InputError(
                f"synthetic: only {len(out)} distinct problems of the {n} asked for at this difficulty; "
                "lower synthetic.sizes or widen synthetic.difficulty"
            )
        p = sample_problem(rng, difficulty)
        if p.question in seen:
            misses += 1
            continue
        misses = 0
        seen.add(p.question)
        out.append(p)
    return out


def make_splits(cfg: dict | None) -> dict[str, list[Problem]]:
    """Disjoint splits ``test``, ``val``, ``train``, ``sft`` (drawn in that order, each excluding the previous), and
    ``ood``: held-out problems of ``ood_difficulty`` (one more operation than training sees, by default)."""
    s = synthetic_settings(cfg)
    splits: dict[str, list[Problem]] = {}
    seen: set[str] = set()
    for offset, split in enumerate(("test", "val", "train", "sft", "ood")):
        difficulty = s["ood_difficulty"] if split == "ood" else s["difficulty"]
        probs = generate_problems(s["sizes"][split], difficulty, seed=s["seed"] * 1000 + offset, exclude=seen)
        seen.update(p.question for p in probs)
        splits[split] = probs
    return splits
