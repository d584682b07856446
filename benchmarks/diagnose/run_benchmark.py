"""Benchmark of ``pgrpo diagnose``: our rule set against the post-training toolkit's GRPO rules on the planted logs
(:mod:`pgrpo.diagnose.planted`) and the labelled public TRL GRPO logs of ``benchmarks/forecast/data``, per log and
failure mode, flagged or not and when, beside the hand label.

    python benchmarks/diagnose/run_benchmark.py [--out results/diagnose_benchmark]   (make diagnose-benchmark)

The same as ``pgrpo diagnose-benchmark`` (what the workflow's ``diagnose_benchmark`` rule runs); the protocol is
described in :mod:`pgrpo.stages.diagnose_benchmark` and :mod:`pgrpo.diagnose.benchmark`.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "workflow"))

from pgrpo.cli import main  # noqa: E402

if __name__ == "__main__":
    args = sys.argv[1:]
    if "--out" not in args:
        args += ["--out", str(ROOT / "results" / "diagnose_benchmark")]
    if "--data-dir" not in args:
        args += ["--data-dir", str(ROOT / "benchmarks" / "forecast" / "data")]
    sys.exit(main(["diagnose-benchmark", *args]))
