"""What the live callback costs the trainer (issue 20: "a live read costs under 1% of a tiny-model step at every=10"):
real TRL ``GRPOTrainer`` steps of the tests' tiny model (``tests/test_train.py``'s ``build_fixture_model``, one
torch thread) without :class:`pgrpo.live.DynamicsCallback`, with it in background mode (the default: the read in one
worker process, applied one read later) and with it synchronous (``background=False``: the read on the trainer's
thread), same seed and steps; then the callback on planted ``log_history`` of realistic length, with the training
time between logs simulated by a sleep of the measured step time.

    python benchmarks/live/bench_overhead.py [--steps 40] [--every 4] [--rows 300 1000] [--reads 4]

A run of 40 steps at ``every=10`` would make only 4 reads, so the trainer part reads every ``--every`` (default 4)
logged steps and scales to ``every=10`` honestly: a read costs the same whatever ``every`` is (its cost depends on
the log's length, not on the cadence), so its cost per training step at ``every=10`` is the cost measured at
``every=E`` times ``E / 10``. Printed per mode:

- the median and mean wall time of a training step (``on_step_begin`` to ``on_step_end``: where a busy worker
  slows the trainer down, competing for a core) and the mean cycle (one ``on_step_begin`` to the next: the step
  plus the callbacks, ``on_log`` included);
- per read: the time spent inside the callback's ``on_log`` on the trainer's thread (the blocking part: the
  snapshot and submission, applying the previous read and writing ``live.json``/``live.html``; synchronous: the
  whole read), the part of it spent waiting for the worker, and the read's own CPU seconds (in the worker for
  background mode);
- the overhead per training step: measured (mean cycle with the callback minus without, over without) at
  ``every=E`` and scaled to ``every=10``, and from the blocking part alone, ``on_log per read / (10 x step)``.

Timings on shared cores are noisy (other jobs run): this prints, it asserts nothing.
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

MODES = ("no callback", "background", "synchronous")
WARM_UP = 2  # steps left out of the step times (the first steps compile and allocate)


def train(model_dir: Path, out: Path, steps: int, callback) -> dict[str, list[float]]:
    """One GRPO run of the tiny model (G=4, 4 prompts, 6 tokens, seed 0) with ``callback`` (or none): the step
    and cycle times, and the trainer's process CPU seconds per step."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from tests.test_train import lower_or_digit_reward, problems

    torch.set_num_threads(1)
    times: dict[str, list[float]] = {"step": [], "cycle": []}

    class Clock(TrainerCallback):
        began: float | None = None

        def on_step_begin(self, args, state, control, **kwargs):
            now = time.perf_counter()
            if self.began is not None:
                times["cycle"].append(now - self.began)
            self.began = now

        def on_step_end(self, args, state, control, **kwargs):
            times["step"].append(time.perf_counter() - self.began)

    args = GRPOConfig(output_dir=str(out), max_steps=steps, per_device_train_batch_size=4, num_generations=4,
                      max_completion_length=6, logging_steps=1, save_strategy="no", report_to=[], learning_rate=5e-3,
                      use_cpu=True, seed=0, disable_tqdm=True)
    callbacks = [Clock()] + ([callback] if callback is not None else [])
    trainer = GRPOTrainer(model=AutoModelForCausalLM.from_pretrained(model_dir),
                          reward_funcs=[lambda completions, answer, **kw: lower_or_digit_reward(completions, answer)],
                          args=args, train_dataset=problems(64, 0),
                          processing_class=AutoTokenizer.from_pretrained(model_dir), callbacks=callbacks)
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)  # no log dict printed per step
    cpu = time.process_time()
    trainer.train()
    cpu = time.process_time() - cpu  # the trainer's process, all its threads; not the worker (a child process)
    return {**{k: v[WARM_UP:] or v for k, v in times.items()}, "cpu": [cpu / steps]}


def per_read(callback) -> dict[str, float]:
    """The callback's costs per read made at a log event (the read at train end left out), in ms: the first
    read's event apart (in the background it pays for the worker's start-up), the others' median and mean."""
    costs = [c for c in callback.costs if c.on_log_seconds > 0] or callback.costs
    if not costs:
        return {}
    on_log = [1000 * c.on_log_seconds for c in costs]
    rest = on_log[2:] or on_log  # from the 3rd read's event on: read 2 applied, the start-up behind
    return {"reads": len(costs), "first": max(on_log[:2]), "median": statistics.median(rest),
            "mean": statistics.mean(rest), "wait": statistics.mean(1000 * c.wait_seconds for c in costs[2:] or costs),
            "cpu": statistics.mean(1000 * c.read_cpu_seconds for c in callback.costs),
            "forecasts": sum(r.fresh_forecast for r in callback.reads)}


HEADER = (f"{'on_log ms/read: first':>22} {'median':>7} {'mean':>7} {'wait ms':>8} {'read CPU ms':>12}")


def read_cells(read: dict[str, float]) -> str:
    return (f"{read['first']:>22.1f} {read['median']:>7.1f} {read['mean']:>7.1f} {read['wait']:>8.1f} "
            f"{read['cpu']:>12.1f}")


def trainer_part(steps: int, every: int) -> float:
    """The three runs on the tiny model; prints their table; returns the median step time without the callback."""
    from pgrpo.live import DynamicsCallback
    from tests.test_train import build_fixture_model

    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = build_fixture_model(Path(tmp) / "model")
        for mode in MODES:
            callback = None if mode == "no callback" else DynamicsCallback(
                every=every, verbose=False, background=mode == "background", output_dir=str(Path(tmp) / mode))
            times = train(model_dir, Path(tmp) / f"out_{mode}", steps, callback)
            rows[mode] = (times, per_read(callback) if callback else {})
    settled = max(0, 2 * every - WARM_UP)  # the cycles after the 2nd read's event: the start-up behind
    base_step = statistics.median(rows["no callback"][0]["step"])
    base = {"all": statistics.mean(rows["no callback"][0]["cycle"]),
            "settled": statistics.mean(rows["no callback"][0]["cycle"][settled:] or [float("nan")])}
    scale = every / 10
    print(f"tiny-model GRPO: {steps} steps per run (the first {WARM_UP} left out), one torch thread, a read every "
          f"{every} logged steps" + (f"; per-step overheads scaled to every=10 by x {every}/10" if every != 10
                                     else ""))
    print(f"{'mode':<12} {'step ms':>8} {'cycle ms':>9} {'settled':>8} {'CPU ms':>7} {'reads':>6} {HEADER} "
          f"{'overhead/step: all':>19} {'settled':>8} {'blocking':>9} {'CPU':>7}")
    for mode, (times, read) in rows.items():
        cycle = {"all": statistics.mean(times["cycle"]),
                 "settled": statistics.mean(times["cycle"][settled:] or [float("nan")])}
        line = f"{mode:<12} {1000 * statistics.median(times['step']):>8.1f} {1000 * cycle['all']:>9.1f} " \
               f"{1000 * cycle['settled']:>8.1f} {1000 * times['cpu'][0]:>7.1f}"
        if read:
            over = {k: (cycle[k] - base[k]) / base[k] * scale for k in cycle}
            blocking = read["median"] / (10 * 1000 * base_step)
            cpu = (times["cpu"][0] - rows["no callback"][0]["cpu"][0]) / rows["no callback"][0]["cpu"][0] * scale
            line += (f" {read['reads']:>6} {read_cells(read)} {over['all']:>19.2%} {over['settled']:>8.2%} "
                     f"{blocking:>9.3%} {cpu:>7.2%}")
        print(line)
    print("step: median on_step_begin..on_step_end; cycle: mean on_step_begin..next on_step_begin (on_log included), "
          f"settled: from step {settled + WARM_UP + 1} on; CPU: the trainer's process CPU per step (all its threads, "
          "not the worker's); overhead/step: (cycle - cycle without) / cycle without; blocking: median on_log per "
          "read / (10 x step without); CPU: (CPU - CPU without) / CPU without; read CPU: the worker's, background")
    return base_step


def planted_part(rows_list: list[int], reads: int, step_seconds: float) -> None:
    """The callback on planted logs of ``rows`` rows: the history up to ``rows - reads x 10`` entries is there
    already, the last ``reads x 10`` are logged one by one with ``step_seconds`` of sleep between (training), so
    that ``reads`` reads at every=10 see the whole long log."""
    import numpy as np

    from pgrpo.diagnose.planted import SEED, simulate, three_phase
    from pgrpo.live import DynamicsCallback

    class State:
        is_world_process_zero = True

    class Control:
        should_save = should_training_stop = False

    class Args:
        learning_rate, adam_beta1, num_iterations, steps_per_generation = 5e-3, 0.9, 1, None
        gradient_accumulation_steps, per_device_train_batch_size, num_generations = 1, 4, 4
        max_completion_length = 1024

    print(f"\nplanted healthy logs, planned for 3x as long; every=10; {reads} reads each; {1000 * step_seconds:.0f} "
          f"ms of simulated training (a sleep) between logs (the median step above)")
    print(f"{'rows':>6} {'mode':<12} {HEADER} {'forecasts':>10} {'blocking/step at every=10':>26}")
    for rows in rows_list:
        rng = np.random.default_rng(SEED)
        history = simulate(rng, rows, lambda t: three_phase(t, 0.1, 0.8, 3.0 / rows), entropy=lambda t: 0 * t + 1.0,
                           kl=lambda t: 0.01 + 0 * t, grad=lambda t: 0.5 + 0 * t, length=lambda t: 200 + 0 * t,
                           cap=1024)
        fed = min(len(history), reads * 10)
        for mode in MODES[1:]:
            with tempfile.TemporaryDirectory() as tmp:
                callback = DynamicsCallback(every=10, verbose=False, background=mode == "background", output_dir=tmp)
                state, control = State(), Control()
                state.log_history, state.max_steps = list(history[:len(history) - fed]), 3 * rows
                state.global_step = int(state.log_history[-1]["step"]) if state.log_history else 0
                callback.on_train_begin(Args(), state, control)
                for entry in history[len(history) - fed:]:
                    time.sleep(step_seconds)
                    state.global_step = int(entry["step"])
                    state.log_history.append(dict(entry))
                    callback.on_log(Args(), state, control, logs=dict(entry))
                callback.on_train_end(Args(), state, control)
                read = per_read(callback)
            print(f"{rows:>6} {mode:<12} {read_cells(read)} {read['forecasts']:>10} "
                  f"{read['mean'] / (10 * 1000 * step_seconds):>26.3%}")
    print("blocking/step: mean on_log per read from the 3rd read's event on / (10 x step)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=120, help="training steps per run (default 120)")
    parser.add_argument("--every", type=int, default=10, help="the trainer part's read cadence (default 10)")
    parser.add_argument("--rows", type=int, nargs="*", default=[300, 1000], help="planted log lengths")
    parser.add_argument("--reads", type=int, default=6, help="reads per planted log (default 6)")
    args = parser.parse_args(argv)
    step = trainer_part(args.steps, args.every)
    if args.rows:
        planted_part(args.rows, args.reads, step)


if __name__ == "__main__":
    main()
