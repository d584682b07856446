"""The live callback's cost against a training step (issue 20: "a read costs under 1% of a tiny-model step at
every=10"): real TRL ``GRPOTrainer`` steps of the tests' tiny model (``tests/test_train.py``'s
``build_fixture_model``, one torch thread), then reads of :func:`pgrpo.live.reads.read_curves` (the callback's read:
``state.log_history`` to curves, ``pgrpo diagnose``'s modes, ``pgrpo forecast``'s forecaster) on planted
``log_history`` of growing length, diagnose-only and with the forecast.

    python benchmarks/live/bench_overhead.py [--steps 12] [--rows 100 300 1000] [--repeats 3]

Prints the median step time, the ms per read (its parts) and the overhead per training step at ``every=10``: one
read every 10 steps, the forecast at every read or at the callback's default schedule (every
``DEFAULT_FORECAST_EVERY`` reads). Timings on shared cores are noisy: this prints, it asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "workflow"))
sys.path.insert(0, str(ROOT))
os.environ.setdefault("OMP_NUM_THREADS", "1")


def step_seconds(steps: int) -> float:
    """The median wall time of a GRPO optimizer step of the tiny model (G=4, 4 prompts, 6 tokens), steps 3.. on."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from tests.test_train import build_fixture_model, lower_or_digit_reward, problems

    torch.set_num_threads(1)
    times: list[float] = []

    class Clock(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            self.t = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            times.append(time.perf_counter() - self.t)

    with tempfile.TemporaryDirectory() as tmp:
        model_dir = build_fixture_model(Path(tmp) / "model")
        args = GRPOConfig(output_dir=str(Path(tmp) / "out"), max_steps=steps, per_device_train_batch_size=4,
                          num_generations=4, max_completion_length=6, logging_steps=1, save_strategy="no",
                          report_to=[], learning_rate=5e-3, use_cpu=True, seed=0, disable_tqdm=True)
        trainer = GRPOTrainer(model=AutoModelForCausalLM.from_pretrained(model_dir),
                              reward_funcs=[lambda completions, answer, **kw: lower_or_digit_reward(completions,
                                                                                                    answer)],
                              args=args, train_dataset=problems(64, 0),
                              processing_class=AutoTokenizer.from_pretrained(model_dir), callbacks=[Clock()])
        trainer.train()
    return statistics.median(times[2:] or times)


def read_ms(rows: int, repeats: int) -> dict[str, float]:
    """Median ms of the read's parts on ``rows`` logged rows of a planted healthy run planned for 3x as long."""
    from pgrpo.diagnose.planted import SEED, simulate, three_phase
    import numpy as np

    from pgrpo.live.reads import LiveSettings, curves_from_history, read_curves

    rng = np.random.default_rng(SEED)
    history = simulate(rng, rows, lambda t: three_phase(t, 0.1, 0.8, 3.0 / rows), entropy=lambda t: 0 * t + 1.0,
                       kl=lambda t: 0.01 + 0 * t, grad=lambda t: 0.5 + 0 * t, length=lambda t: 200 + 0 * t, cap=1024)
    settings = LiveSettings(max_completion_length=1024)
    parts: dict[str, list[float]] = {"curves": [], "diagnose": [], "forecast": []}
    for _ in range(repeats):
        t0 = time.perf_counter()
        curves = curves_from_history(history)
        t1 = time.perf_counter()
        read_curves(curves, settings, 3 * rows, None, forecast=False)
        t2 = time.perf_counter()
        read_curves(curves, settings, 3 * rows, None, forecast=True)
        t3 = time.perf_counter()
        parts["curves"].append(t1 - t0)
        parts["diagnose"].append(t2 - t1)
        parts["forecast"].append((t3 - t2) - (t2 - t1))
    return {k: 1000 * statistics.median(v) for k, v in parts.items()}


def main(argv: list[str] | None = None) -> None:
    from pgrpo.live.reads import DEFAULT_FORECAST_EVERY

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--rows", type=int, nargs="+", default=[100, 300, 1000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--every", type=int, default=10)
    args = parser.parse_args(argv)
    step = step_seconds(args.steps)
    print(f"tiny-model GRPO step: {1000 * step:.0f} ms (median of {args.steps} steps, one thread)")
    k = DEFAULT_FORECAST_EVERY
    print(f"{'rows':>6} {'curves ms':>10} {'diagnose ms':>12} {'forecast ms':>12} {'read/step':>10} "
          f"{'fc every read':>14} {f'fc every {k}':>11} {'no fc':>8}   (overhead per training step at every="
          f"{args.every}, fc: forecast)")
    for rows in args.rows:
        ms = read_ms(rows, args.repeats)
        base = ms["curves"] + ms["diagnose"]
        full = base + ms["forecast"]
        always = full / (args.every * 1000 * step)
        scheduled = (base + ms["forecast"] / k) / (args.every * 1000 * step)
        print(f"{rows:>6} {ms['curves']:>10.1f} {ms['diagnose']:>12.1f} {ms['forecast']:>12.1f} "
              f"{full / (1000 * step):>10.1%} {always:>14.2%} {scheduled:>11.2%} "
              f"{base / (args.every * 1000 * step):>8.2%}")


if __name__ == "__main__":
    main()
