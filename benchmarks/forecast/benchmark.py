"""Forecast benchmark: fit on the first f of a curve's steps, score on the rest, for the forecaster and the baselines.

    PYTHONPATH=workflow python benchmarks/forecast/benchmark.py --csv results/forecast/benchmark.csv \\
        --md results/forecast/benchmark.md --png results/forecast/benchmark.png [--logs results/train/*/*/*/log.csv]

The same as ``pgrpo forecast-benchmark`` (what the workflow's ``forecast_benchmark`` rule runs); the corpus, its
provenance and the protocol are described in :mod:`pgrpo.stages.forecast_benchmark` and :mod:`pgrpo.fit.benchmark`.
Here the finite-G bandit comes from ``pgrpo.bandit.finite_g`` if the package has it, else from a
``finite_g_bandit.py`` module file (``--finite-g-file``), else the exact bandit with binomial noise stands in (the
notes say which).
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "workflow"))

from pgrpo.stages.forecast_benchmark import DEFAULTS, finite_g_simulator, run_forecast_benchmark_all  # noqa: E402


def simulator_from_file(path: Path):
    spec = importlib.util.spec_from_file_location("finite_g_bandit_file", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.simulate_finite_g, str(path)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=str(ROOT / DEFAULTS["data_dir"]))
    parser.add_argument("--logs", nargs="*", default=None, help="workflow log.csv files (default: results/train)")
    parser.add_argument("--csv", required=True)
    parser.add_argument("--md", required=True)
    parser.add_argument("--png")
    parser.add_argument("--fractions", type=float, nargs="+", default=DEFAULTS["fractions"])
    parser.add_argument("--bandit-settings", type=int, default=None, help="only the first N bandit settings")
    parser.add_argument("--no-levers", action="store_true", help="skip the lever ablations")
    parser.add_argument("--workers", type=int, default=1, help="score the corpus on N processes (pgrpo.parallel)")
    parser.add_argument("--finite-g-file", default="/work/main/workflow/pgrpo/finite_g_bandit.py")
    args = parser.parse_args(argv)

    simulator, origin = finite_g_simulator()
    if simulator is None and Path(args.finite_g_file).is_file():
        simulator, origin = simulator_from_file(Path(args.finite_g_file))
    logs = args.logs if args.logs is not None else sorted(glob.glob("results/train/*/G*/seed*/log.csv"))
    section = {"fractions": args.fractions, "bandit_settings": args.bandit_settings, "levers": not args.no_levers}
    started = time.time()
    result = run_forecast_benchmark_all(section, logs, args.csv, args.md, args.png, data_dir=args.data_dir,
                                        simulator=simulator, origin=origin, workers=args.workers,
                                        progress=lambda cid: print(f"{time.time() - started:7.1f}s {cid}",
                                                                   file=sys.stderr))
    print(f"forecast benchmark: {len({r['curve'] for r in result['rows']})} curves in "
          f"{time.time() - started:.0f} s -> {args.md}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
