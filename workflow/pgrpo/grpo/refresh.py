"""The refresh schedule of Eq. (3) in TRL's terms: how many micro-steps one generation batch serves, and K_ref, the
number of optimizer steps between refreshes of pi_old (Section 3.1). Pure arithmetic on the ``training`` section, so
that the readers of a run (the live callback, the plan) need none of the training stack.
"""

from __future__ import annotations


def generate_every_micro_steps(training: dict) -> int:
    """Micro-steps served by one generation batch: ``steps_per_generation * num_iterations`` (TRL's count)."""
    steps_per_generation = training["steps_per_generation"] or training["gradient_accumulation_steps"]
    return steps_per_generation * training["num_iterations"]


def refresh_interval(training: dict) -> float:
    """K_ref of Eq. (3) in optimizer steps: TRL's micro-step refresh period over the accumulation length.

    On-policy TRL (generation period <= accumulation, dividing it) gives K_ref = 1. The value is an int when the
    division is exact and a float otherwise.
    """
    ratio = generate_every_micro_steps(training) / training["gradient_accumulation_steps"]
    if ratio <= 1 and training["gradient_accumulation_steps"] % generate_every_micro_steps(training) == 0:
        return 1
    return int(ratio) if float(ratio).is_integer() else ratio
