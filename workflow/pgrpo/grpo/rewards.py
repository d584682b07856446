"""The binary verifiable reward of Section 4.2: parse the final answer and compare it with the gold one.

GSM8K gold solutions end with ``#### N`` (Cobbe et al., 2021). A completion's final answer is, in order of
preference, the number after its first ``####``, the content of its last ``\boxed{...}``, or its last number;
commas, ``$`` and a trailing period are stripped. Answers are compared numerically; when either side is not a
plain number (LaTeX such as ``\frac{1}{2}``) the comparison falls back to math-verify's ``parse``/``verify``.
The reward is 1.0 for a correct final answer and 0.0 otherwise (also for any garbage: the reward never raises).
:func:`accuracy_reward` has the signature TRL's GRPOTrainer expects of a reward function.

"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Any, Sequence

_NUMBER = r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|-?\.\d+"


_NUMBER_RE = re.compile(_NUMBER)


_NUMBER_OR_FRACTION_RE = re.compile(rf"(?:{_NUMBER})(?:\s*/\s*\d+)?")


_HASH_RE = re.compile(r"####\s*(.*)")


_PLAIN_NUMBER_RE = re.compile(r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$")


_FRACTION_RE = re.compile(r"^([+-]?\d+)\s*/\s*(\d+)$")


def _clean(text: str) -> str:
    """Strip surrounding space, ``$``, commas between digits, a trailing period, and a leading ``+``."""
    s = text.strip().replace("$", "").replace("\\$", "")
    s = re.sub(r"(?<=\d),(?=\d)", "", s)
    s = s.strip().rstrip(".").strip()
    return s


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (or ``\\fbox{...}``) with balanced braces, else None."""
    starts = [m.start() for m in re.finditer(r"\\(?:boxed|fbox)\s*\{", text)]
    for start in reversed(starts):
        i = text.index("{", start)
        depth = 0
        for j in range(i, len(text)):
            if text[j] == "{":
                depth += 1
            elif text[j] == "}":
                depth -= 1
                if depth == 0:
                    return text[i + 1 : j].strip()
    return None


def extract_final_answer(text: Any) -> str | None:
    """The final answer of a solution text: after the first ``####``, else the last ``\\boxed{}``, else the last number.

    The first ``####`` (as lm-eval's GSM8K strict match) is the answer given; text a model rambles on with after it
    (a new "Question: ...") does not count.
    Numbers come back cleaned (no commas, ``$`` or trailing period), e.g. ``"#### $1,234."`` -> ``"1234"``.
    Returns None when the text holds no answer (or is not a string).
    """
    if not isinstance(text, str) or not text:
        return None
    hashes = _HASH_RE.findall(text)
    if hashes:
        tail = hashes[0].strip()
        m = _NUMBER_OR_FRACTION_RE.search(tail.replace("$", ""))
        if m:
            return _clean(m.group(0))
        boxed = last_boxed(tail)
        if boxed:
            return _clean(boxed)
        if tail:
            return _clean(tail)
    boxed = last_boxed(text)
    if boxed is not None and boxed != "":
        return _clean(boxed)
    numbers = _NUMBER_RE.findall(text.replace("$", ""))
    if numbers:
        return _clean(numbers[-1])
    return None


def to_number(text: Any) -> Fraction | None:
    """An exact number from a plain numeric string (``"-3"``, ``"1,234.50"``, ``"$7"``, ``"3/4"``, ``"50%"``
    is not a plain number), else None."""
    if isinstance(text, bool):
        return None
    if isinstance(text, (int, float)):
        return Fraction(text) if math.isfinite(text) else None
    if not isinstance(text, str):
        return None
    s = _clean(text)
    if _PLAIN_NUMBER_RE.match(s):
        try:
            return Fraction(s)
        except (ValueError, ZeroDivisionError):
            return None
    m = _FRACTION_RE.match(s)
    if m and int(m.group(2)) != 0:
        return Fraction(int(m.group(1)), int(m.group(2)))
    return None


def numbers_equal(a: Any, b: Any, rel_tol: float = 1e-6) -> bool:
    """True when both are plain numbers and equal up to a relative tolerance (``1e-6 * max(1, |b|)``)."""
    x, y = to_number(a), to_number(b)
    if x is None or y is None:
        return False
    if x == y:
        return True
    return abs(float(x) - float(y)) <= rel_tol * max(1.0, abs(float(y)))


def gold_answer(answer_field_text: Any) -> str | None:
    """The gold final answer from a dataset's answer field: after ``####`` (GSM8K), else a boxed answer, else the
    whole (cleaned) text, e.g. MATH-500's ``"\\frac{1}{2}"`` or a bare ``"72"``."""
    if isinstance(answer_field_text, (int, float)) and not isinstance(answer_field_text, bool):
        return _clean(str(answer_field_text))
    if not isinstance(answer_field_text, str) or not answer_field_text.strip():
        return None
    text = answer_field_text
    if "####" in text:
        return extract_final_answer(text)
    boxed = last_boxed(text)
    if boxed:
        return _clean(boxed)
    return _clean(text)


def _math_verify_equal(pred: str, gold: str) -> bool:
    """math-verify's symbolic equivalence of two answers (LaTeX or plain), False on any failure."""
    try:
        from math_verify import parse, verify

        def as_latex(s: str):
            s = s.strip()
            return parse(s if (s.startswith("$") or "\\boxed" in s) else f"${s}$")

        g, p = as_latex(gold), as_latex(pred)
        if not g or not p:
            return False
        return bool(verify(g, p))
    except Exception:  # noqa: BLE001 - a reward must never raise
        return False


def is_correct(completion: Any, gold: Any) -> bool:
    """Whether a completion's final answer equals the gold answer (``gold`` may be the full answer field)."""
    try:
        pred = extract_final_answer(completion)
        target = gold_answer(gold)
        if pred is None or target is None:
            return False
        if to_number(pred) is not None and to_number(target) is not None:
            return numbers_equal(pred, target)
        return _math_verify_equal(pred, target)
    except Exception:  # noqa: BLE001
        return False


def completion_text(completion: Any) -> str:
    """The generated text of a TRL completion: a string, or the last message's content of a message list."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        content = completion.get("content", "")
        return content if isinstance(content, str) else ""
    if isinstance(completion, (list, tuple)) and completion:
        return completion_text(completion[-1])
    return ""


def accuracy_reward(completions: Sequence[Any], answer: Sequence[Any], **kwargs: Any) -> list[float]:
    """TRL reward function: 1.0 where the completion's final answer matches the gold ``answer`` column, else 0.0.

    TRL passes the dataset's extra columns as keyword arguments, so a dataset with an ``answer`` column (as made by
    :func:`pgrpo.grpo.data.load_problems`) needs nothing else. Completions may be strings or chat message lists.
    """
    rewards = []
    for comp, gold in zip(completions, answer):
        try:
            rewards.append(1.0 if is_correct(completion_text(comp), gold) else 0.0)
        except Exception:  # noqa: BLE001
            rewards.append(0.0)
    return rewards
