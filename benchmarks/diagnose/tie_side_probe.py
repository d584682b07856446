"""Dev only (session 27, docs/diagnose.md "Declared ranges"): a range-free reading of where tied groups sit, probed
and not pursued. For the dev logs whose reward never moved beyond its noise, and the two dev runs tied at their
ceiling from the first steps, the correlation over the steps between the share of tied groups and the reward
(ties at the top of what the run scores: positive; at its floor: negative), beside the degeneracy flag and label.

    python benchmarks/diagnose/tie_side_probe.py
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "workflow"))

from pgrpo.diagnose.modes.degeneracy import _zero_spread, degeneracy  # noqa: E402
from pgrpo.diagnose.modes.signals import curve, reward_position  # noqa: E402
from pgrpo.diagnose.settings import DiagnosticsConfig  # noqa: E402
from pgrpo.stages.diagnose import log_curves  # noqa: E402
from pgrpo.stages.diagnose_benchmark import DEFAULT_DATA_DIR, real_runs  # noqa: E402

TIED_AT_CEILING = ("ahmedrafid3s5_qwen3vl", "aromalbiju1")


def main() -> None:
    config = DiagnosticsConfig()
    for run in real_runs(DEFAULT_DATA_DIR):
        if run["split"] != "dev":
            continue
        curves = log_curves(str(run["path"]), run["meta"] or None, None, allow_non_finite=True)
        reward, spread = curve(curves, "reward", config), _zero_spread(curves, config)
        if reward is None or spread is None:
            continue
        if reward_position(curves, reward, config).moved and not run["name"].startswith(TIED_AT_CEILING):
            continue
        steps, share, _ = spread
        values = np.interp(steps, reward.steps, reward.values)
        rho = float(np.corrcoef(share, values)[0, 1]) if np.std(share) > 0 and np.std(values) > 0 else math.nan
        z = math.atanh(max(min(rho, 0.999), -0.999)) * math.sqrt(max(steps.size - 3, 1)) if math.isfinite(rho) else math.nan
        label = (run["labels"].get("degeneracy") or {}).get("label")
        print(f"{run['name']:50s} degeneracy flagged={degeneracy(curves, config).flagged!s:5} label={label!s:5} "
              f"tied share vs reward: r={rho:+.2f} (z={z:+.1f})")


if __name__ == "__main__":
    main()
