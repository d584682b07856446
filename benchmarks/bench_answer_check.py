"""Benchmark: the answer check the reward runs on every training completion (:func:`pgrpo.grpo.answer_check.is_correct`).

Times, best of ``--repeats``: GSM8K-style completions ('#### N', the fast path) checked against their gold, right
and wrong, in calls per second; a LaTeX answer that goes through math-verify; and the refusal of inputs SymPy would
spend unbounded time on (``10^{10^{10}}``, ``99999!``), which must stay a fraction of a second. Not a test: timings
on shared cores are noisy, so nothing is asserted (the tests check the verdicts, and that a refused input never
reaches math-verify's parser).

    python benchmarks/bench_answer_check.py
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow"))

from pgrpo.grpo.answer_check import is_correct  # noqa: E402
from timing import best_of  # noqa: E402  (benchmarks/timing.py, beside this script)


def gsm8k_style(n_a: int = 40, n_b: int = 50) -> tuple[list[str], list[str]]:
    """``n_a * n_b`` completions 'a + b = c' then '#### c' (thousands separators) and their GSM8K golds."""
    completions = [f"{a} + {b} = {a + b}\n#### {a + b:,}" for a in range(n_a) for b in range(n_b)]
    golds = [f"{a} + {b} = <<{a}+{b}={a + b}>>{a + b}\n#### {a + b}" for a in range(n_a) for b in range(n_b)]
    return completions, golds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    completions, golds = gsm8k_style()
    wrong = [g.replace("#### ", "#### 1") for g in golds]

    def gsm8k() -> int:
        return sum(is_correct(c, g) for c, g in zip(completions, golds)) + sum(
            is_correct(c, g) for c, g in zip(completions, wrong))

    seconds, right = best_of(args.repeats, gsm8k)
    calls = 2 * len(completions)
    print(f"GSM8K-style '#### N': {calls / seconds:,.0f} calls/s ({calls} calls, {right} right, best of {args.repeats})")

    latex = [(f"The answer is $\\boxed{{\\frac{{{k}}}{{{k + 1}}}}}$.", f"\\frac{{{2 * k}}}{{{2 * k + 2}}}")
             for k in range(1, 101)]
    seconds, right = best_of(args.repeats, lambda: sum(is_correct(c, g, kind="math") for c, g in latex))
    print(f"LaTeX fractions through math-verify: {len(latex) / seconds:,.0f} calls/s ({right} of {len(latex)} right)")

    for text in ("\\boxed{10^{10^{10}}}", "\\boxed{99999!}"):
        seconds, verdict = best_of(args.repeats, lambda: is_correct(text, "5"))
        print(f"refused {text!r}: {1e6 * seconds:.0f} µs (verdict {verdict})")


if __name__ == "__main__":
    main()
