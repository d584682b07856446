"""The binary verifiable reward of Section 4.2 ("a binary verifiable reward that checks the parsed final answer
against the gold solution"), over the answer checking of :mod:`pgrpo.grpo.answer_check`.

The reward is 1.0 for a correct final answer and 0.0 otherwise (also for any garbage: it never raises);
:func:`accuracy_reward` has the signature TRL's GRPOTrainer expects of a reward function. Answers are checked by
kind (:data:`KINDS`): numbers (GSM8K ``#### N``, thousands separators, signs, decimals, fractions), LaTeX through
math-verify (intervals, sets, tuples, ``\\dfrac``, radicals, ``\\text{}``, units), multiple-choice letters and
integers. :func:`numbers_equal` compares two numbers written as text.
"""

from __future__ import annotations

from typing import Any

from pgrpo.grpo.answer_check import (  # noqa: F401
    KINDS,
    accuracy_reward,
    completion_text,
    extract_final_answer,
    gold_answer,
    is_correct,
    last_boxed,
    resolve_kind,
)


def numbers_equal(a: Any, b: Any) -> bool:
    """Whether two numbers written as text (``"1,234"``, ``"$5"``, ``"0.5"``, ``"1/2"``) are equal."""
    if not isinstance(a, str) or not isinstance(b, str) or not a.strip() or not b.strip():
        return False
    return is_correct(f"#### {a}", b, kind="number")
