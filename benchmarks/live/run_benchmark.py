"""The live benchmark: the live callback (``pgrpo.live.DynamicsCallback``) replayed with ``pgrpo replay``'s code path
over the planted logs (:mod:`pgrpo.diagnose.planted`) and the labelled public TRL GRPO logs of
``benchmarks/forecast/data`` (dev and holdout), beside the post-training toolkit's DiagnosticsCallback replayed the
same way: per failure mode, detection latency after the labelled onset, false alarms and stops per healthy run,
steps saved and reward lost.

    python benchmarks/live/run_benchmark.py [--out results/live_benchmark]

The same as ``pgrpo live-benchmark`` (what the workflow's ``live_benchmark`` rule runs); the protocol is described
in :mod:`pgrpo.stages.live_benchmark` and :mod:`pgrpo.live.benchmark`. Our stops are scored as the callback makes
them by default, in the background: one read after the read that decided (``lag_reads = 1``,
:func:`pgrpo.live.benchmark.default_lag_reads`); the toolkit's callback, which reads on the trainer's thread, with
no lag. The cost of a read against a training step: ``benchmarks/live/bench_overhead.py``.
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
        args += ["--out", str(ROOT / "results" / "live_benchmark")]
    if "--data-dir" not in args:
        args += ["--data-dir", str(ROOT / "benchmarks" / "forecast" / "data")]
    sys.exit(main(["live-benchmark", *args]))
