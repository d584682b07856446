"""The shipped synthetic GSM8K-style word problems of the embedded default ("Ann has 7 apples. She buys 3 more.
...", gold ``#### N``): difficulty settings, seeded generation, disjoint splits, and the graded suite of Table 1's
role on the default (Section 5.7: "the size of the transfer is strongly graded by the distance between the training
and evaluation distributions"): sets at increasing distance from the training data (distractor sentences, larger
numbers, a held-out operation mix), each drawn from its own seed and disjoint from every split.
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass
from collections.abc import Callable, Iterable
from typing import Any

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
    # never in the default's training data: the held-out operation of the graded suite
    "div": ["{p} splits them into {k} equal piles and keeps one pile.",
            "{p} puts them equally into {k} bags and keeps one bag."],
}


SYMBOL = {"add": "+", "sub": "-", "mul": "*", "div": "/"}


#: irrelevant sentences of the distractor set: a number that does not enter the answer. ``{other}`` is someone
#: else, of the other pronoun, so that the next "she"/"he" still refers to the question's subject.
DISTRACTORS = [
    "{other} has {k} {items}.",
    "{other} has {k} {other_items}.",
    "{name} is {k} years old.",
    "{name} lives {k} blocks from the park.",
]
#: a distractor goes after the first sentence and before the question, but never right before a step of these
#: operations ("... times as many", "... splits them"), which would then read as referring to the distractor
NO_DISTRACTOR_BEFORE = ("mul", "div")


DEFAULT_SYNTHETIC: dict[str, Any] = {
    "seed": 1234,
    "sizes": {"sft": 20000, "val": 200, "train": 4000, "test": 500, "ood": 300},
    "difficulty": {"min_ops": 1, "max_ops": 2, "start_max": 20, "operand_max": 10, "mul_max": 3,
                   "ops": ["add", "sub", "mul"]},
    # the out-of-distribution benchmark of the embedded default (Table 1's role): one more operation than
    # training ever shows; keys not given here are taken from `difficulty`
    "ood_difficulty": {"min_ops": 3, "max_ops": 3},
    # graded benchmarks, name -> {size, difficulty (over `difficulty`), distractors, held_out_mix}; none by default
    "suite": {},
}


#: one graded set of ``synthetic.suite``: its size, difficulty overrides, distractor sentences per problem, and
#: whether every problem's sequence of operations must be absent from the training data
SUITE_DEFAULTS: dict[str, Any] = {"size": 300, "difficulty": {}, "distractors": 0, "held_out_mix": False}


@dataclass(frozen=True)
class Problem:
    """One synthetic problem: the question text, the gold worked solution (``... #### N``) and its parts."""

    question: str
    answer: str
    start: int
    steps: tuple[tuple[str, int], ...]  # (operation, operand)
    result: int
    distractors: tuple[str, ...] = ()  # irrelevant sentences inserted into the question (the distractor set)
    core_question: str | None = None  # the question without them (None: no distractors)

    @property
    def base_question(self) -> str:
        """The question without its distractor sentences: what must not repeat a training question."""
        return self.core_question if self.core_question is not None else self.question

    @property
    def signature(self) -> tuple[str, ...]:
        """The sequence of operations (``("add", "mul")``): the operation mix of the problem."""
        return tuple(op for op, _ in self.steps)


def apply_op(op: str, a: int, b: int) -> int:
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    if op == "div":
        if b < 1 or a % b:
            raise InputError(f"synthetic: {a} does not split into {b} equal piles")
        return a // b
    raise InputError(f"synthetic.difficulty.ops: unknown operation {op!r} (use {', '.join(SYMBOL)})")


def _check_difficulty(d: dict, where: str = "synthetic.difficulty") -> None:
    for key in ("min_ops", "max_ops", "start_max", "operand_max", "mul_max"):
        if not isinstance(d.get(key), int) or isinstance(d.get(key), bool) or d[key] < 1:
            raise InputError(f"{where}.{key} must be a positive integer, got {d.get(key)!r}")
    for low, high in (("start_min", "start_max"), ("operand_min", "operand_max")):
        value = d.get(low, 1)
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= d[high]:
            raise InputError(f"{where}.{low} must be an integer from 1 to {high} ({d[high]}), got {value!r}")
    if d["min_ops"] > d["max_ops"]:
        raise InputError(f"{where}.max_ops ({d['max_ops']}) is below min_ops ({d['min_ops']})")
    if d["mul_max"] < 2 and ("mul" in d["ops"] or "div" in d["ops"]):
        raise InputError(f"{where}.mul_max must be at least 2 when 'mul' or 'div' is among the ops")
    if not d["ops"] or any(op not in SYMBOL for op in d["ops"]):
        raise InputError(f"{where}.ops must be a non-empty subset of {list(SYMBOL)}, got {d['ops']!r}")
    if not any(op in ("add", "mul") for op in d["ops"]):
        raise InputError(f"{where}.ops needs 'add' or 'mul' (a step that is always possible), got {d['ops']!r}")


def _divisors(value: int, d: dict) -> list[int]:
    """The pile counts ``k`` in [2, mul_max] that split ``value`` exactly (none for a value below 2)."""
    return [k for k in range(2, d["mul_max"] + 1) if value >= k and value % k == 0]


def _possible(op: str, value: int, d: dict) -> bool:
    """Whether ``op`` can follow ``value``: a subtraction never takes more than there is, a division is exact."""
    if op == "sub":
        return value >= d.get("operand_min", 1)
    if op == "div":
        return bool(_divisors(value, d))
    return True


def sample_problem(rng: random.Random, difficulty: dict, distractors: int = 0) -> Problem:
    """Draw one problem. Quantities stay non-negative integers: a subtraction never takes more than there is and a
    division is exact. With ``distractors`` > 0, that many irrelevant sentences with a number (:data:`DISTRACTORS`)
    are inserted after the first sentence and before the question; they do not change the answer.

    The draws for ``distractors=0`` and ops without ``div`` are those of the original generator, so the default's
    splits stay byte-identical.
    """
    name, pronoun = rng.choice(NAMES)
    items = rng.choice(ITEMS)
    start = rng.randint(difficulty.get("start_min", 1), difficulty["start_max"])
    n_ops = rng.randint(difficulty["min_ops"], difficulty["max_ops"])
    value, steps, sentences, lines = start, [], [], []
    low = difficulty.get("operand_min", 1)
    for _ in range(n_ops):
        op = rng.choice([op for op in difficulty["ops"] if _possible(op, value, difficulty)])
        if op == "add":
            k = rng.randint(low, difficulty["operand_max"])
        elif op == "sub":
            k = rng.randint(low, min(value, difficulty["operand_max"]))
        elif op == "mul":
            k = rng.randint(2, difficulty["mul_max"])
        else:
            k = rng.choice(_divisors(value, difficulty))
        new = apply_op(op, value, k)
        sentences.append(rng.choice(PHRASES[op]).format(p=pronoun.capitalize(), k=k))
        lines.append(f"{value}{SYMBOL[op]}{k}={new}")
        steps.append((op, k))
        value = new
    parts = [f"{name} has {start} {items}.", *sentences, f"How many {items} does {name} have?"]
    question, core, added = " ".join(parts), None, []
    if distractors:
        core = question
        others = [n for n, p in NAMES if p != pronoun]
        slots = [i for i in range(1, len(parts))
                 if i == len(parts) - 1 or steps[i - 1][0] not in NO_DISTRACTOR_BEFORE]
        placed = []
        for _ in range(distractors):
            template = rng.choice(DISTRACTORS)
            sentence = template.format(other=rng.choice(others), name=name, items=items,
                                       other_items=rng.choice([i for i in ITEMS if i != items]),
                                       k=rng.randint(2, max(3, difficulty["start_max"])))
            placed.append((rng.choice(slots), sentence))
            added.append(sentence)
        for slot, sentence in sorted(placed, key=lambda x: -x[0]):
            parts.insert(slot, sentence)
        question = " ".join(parts)
    answer = "\n".join(lines) + f"\n#### {value}"
    return Problem(question=question, answer=answer, start=start, steps=tuple(steps), result=value,
                   distractors=tuple(added), core_question=core)


def _suite_settings(suite: Any, difficulty: dict) -> dict[str, dict]:
    """``synthetic.suite`` with :data:`SUITE_DEFAULTS` filled in and each difficulty merged over ``difficulty``."""
    if suite is None:
        return {}
    if not isinstance(suite, dict):
        raise InputError(f"synthetic.suite must be a mapping name -> settings, got {suite!r}")
    out = {}
    for name, entry in suite.items():
        where = f"synthetic.suite.{name}"
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*", name):
            raise InputError(f"{where}: a set name may hold only letters, digits, '-' and '_'")
        entry = dict(entry or {})
        unknown = set(entry) - set(SUITE_DEFAULTS)
        if unknown:
            raise InputError(f"{where}: unknown key(s) {sorted(unknown)} (known: {sorted(SUITE_DEFAULTS)})")
        merged = {**SUITE_DEFAULTS, **entry}
        merged["difficulty"] = {**difficulty, **(entry.get("difficulty") or {})}
        for key in ("size", "distractors"):
            value = merged[key]
            if not isinstance(value, int) or isinstance(value, bool) or value < (1 if key == "size" else 0):
                raise InputError(f"{where}.{key} must be a {'positive' if key == 'size' else 'non-negative'} "
                                 f"integer, got {value!r}")
        if not isinstance(merged["held_out_mix"], bool):
            raise InputError(f"{where}.held_out_mix must be true or false, got {merged['held_out_mix']!r}")
        _check_difficulty(merged["difficulty"], f"{where}.difficulty")
        out[name] = merged
    return out


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
    _check_difficulty(merged["ood_difficulty"], "synthetic.ood_difficulty")
    merged["suite"] = _suite_settings(cfg.get("suite"), merged["difficulty"])
    return merged


def generate_problems(n: int, difficulty: dict, seed: int, exclude: Iterable[str] = (), distractors: int = 0,
                      accept: Callable[[Problem], bool] | None = None) -> list[Problem]:
    """``n`` distinct problems (by question text), none of whose questions (without distractor sentences) is in
    ``exclude`` and each passing ``accept`` if given; deterministic in seed."""
    _check_difficulty(difficulty)
    rng = random.Random(seed)
    seen = set(exclude)
    out: list[Problem] = []
    misses, max_misses = 0, 5000  # consecutive rejections before declaring the problem space exhausted
    while len(out) < n:
        if misses > max_misses:
            raise InputError(
                f"synthetic: only {len(out)} distinct problems of the {n} asked for at this difficulty; "
                "lower synthetic.sizes or widen synthetic.difficulty"
            )
        p = sample_problem(rng, difficulty, distractors=distractors)
        if p.base_question in seen or p.question in seen or (accept is not None and not accept(p)):
            misses += 1
            continue
        misses = 0
        seen.update((p.base_question, p.question))
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


#: the splits a model learns from (warm start and GRPO): a held-out mix must be absent from all of them
TRAINING_SPLITS = ("sft", "val", "train")


_WORKED_STEP = re.compile(r"^\s*-?\d+\s*([-+*/])\s*\d+\s*=\s*-?\d+\s*$")


def signature_of_answer(answer: str) -> tuple[str, ...]:
    """The sequence of operations of a worked solution (``"7+3=10\\n10*2=20\\n#### 20"`` -> ``("add", "mul")``)."""
    by_symbol = {v: k for k, v in SYMBOL.items()}
    return tuple(by_symbol[m.group(1)] for line in str(answer).splitlines() if (m := _WORKED_STEP.match(line)))


def suite_seed(seed: int, name: str) -> int:
    """The seed of graded set ``name``: its own stream, independent of the splits' seeds and of the other sets."""
    return int.from_bytes(hashlib.sha256(f"{seed}/suite/{name}".encode()).digest()[:8], "big")


def make_suite(cfg: dict | None, exclude: Iterable[str], training_signatures: Iterable[tuple[str, ...]]
               ) -> dict[str, list[Problem]]:
    """The graded sets of ``synthetic.suite``, in config order, each from :func:`suite_seed`.

    ``exclude``: every question of the splits (no graded question, without its distractors, repeats one, nor one of
    an earlier set); ``training_signatures``: the operation sequences of the training splits; a set with
    ``held_out_mix`` keeps only problems whose sequence is not among them.
    """
    s = synthetic_settings(cfg)
    seen, train_mix = set(exclude), {tuple(sig) for sig in training_signatures}
    out: dict[str, list[Problem]] = {}
    for name, entry in s["suite"].items():
        accept = (lambda p: p.signature not in train_mix) if entry["held_out_mix"] else None
        probs = generate_problems(entry["size"], entry["difficulty"], seed=suite_seed(s["seed"], name), exclude=seen,
                                  distractors=entry["distractors"], accept=accept)
        seen.update(q for p in probs for q in (p.base_question, p.question))
        out[name] = probs
    return out
