"""Dev only (session 27's third round, docs/live-history.md): the dev logs whose hacking read-out finds no gold reward
function by name, with their reward functions and hacking labels. Lists; runs no detector.

    python benchmarks/live/gold_names_probe.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "workflow"))

from pgrpo.diagnose.modes.signals import components  # noqa: E402
from pgrpo.diagnose.readouts.hacking import held_out_column  # noqa: E402
from pgrpo.diagnose.settings import DiagnosticsConfig  # noqa: E402
from pgrpo.stages.diagnose import log_curves  # noqa: E402
from pgrpo.stages.diagnose_benchmark import DEFAULT_DATA_DIR, real_runs  # noqa: E402


def main() -> None:
    config = DiagnosticsConfig().reward_hacking
    for run in real_runs(DEFAULT_DATA_DIR):
        if run["split"] != "dev":
            continue
        curves = log_curves(str(run["path"]), run["meta"] or None, None, allow_non_finite=True)
        functions = [c.split("/")[1] for c in components(curves)]
        if held_out_column(curves, config)[0] is None and functions:
            label = (run["labels"].get("hacking") or {}).get("label")
            print(f"{run['name']:55s} hacking={str(label):5s} functions={functions}")


if __name__ == "__main__":
    main()
