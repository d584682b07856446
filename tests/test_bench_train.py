"""benchmarks/bench_train.py's method (the workflow's GRPO step against plain TRL) and the generation setting it
measured and kept: TRL generating every group of an optimizer step in one ``model.generate`` call, with the dynamic
cache and no compilation (the static cache and ``torch.compile`` did not pay on the tiny model; docs/performance.md).

Speed itself is measured by the script, never asserted here.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
from pathlib import Path

import pytest
import yaml

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from pgrpo.grpo.training_config import build_grpo_config, resolve_training, validate_training  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str):
    path = ROOT / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"bench_{name}_under_test", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module


def test_the_default_generates_every_group_of_a_step_in_one_call(tmp_path):
    """config/config.yaml's training section: one generation batch per optimizer step holding all
    per_device_train_batch_size / G groups (TRL makes one generate call of generation_batch_size completions), the
    dynamic cache (cache_implementation unset) and TRL's generation kwargs without a compile setting."""
    training = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["training"]
    for G in (4, 16):
        t = validate_training(resolve_training(training), G)
        args = build_grpo_config(t, G, 42, str(tmp_path), has_eval=False, cuda=False)
        assert args.generation_batch_size == 32 == training["per_device_train_batch_size"]
        assert args.generation_batch_size // G == 32 // G  # 8 groups at G=4, 2 at G=16, all in the one call
        assert args.cache_implementation is None
        assert not any(key in (args.generation_kwargs or {}) for key in ("cache_implementation", "compile_config"))


def test_steady_state_drops_the_warm_up_steps():
    timing = _load("timing")
    times = timing.steady_state([9.0, 7.0, 1.0, 2.0, 6.0], warmup=2)
    assert (times.mean, times.median, times.best, times.steps, times.total) == (3.0, 2.0, 1.0, 3, 9.0)
    with pytest.raises(ValueError):
        timing.steady_state([1.0, 2.0], warmup=2)


def test_lockstep_alternates_steps_and_keeps_each_threads_random_stream():
    """Two threads stepping in lockstep take turns exactly (a, b, a, b, ...; the longer one finishes alone), and each
    draws from the global torch generator what it would draw alone under its own seed."""
    bench = _load("bench_train")
    lockstep = bench.Lockstep("a", "b")
    order: list[str] = []
    draws: dict[str, list[float]] = {}
    steps = {"a": 4, "b": 6}
    seeds = {"a": 1, "b": 2}

    def run(name: str) -> None:
        try:
            lockstep.enter_setup(name)
            torch.manual_seed(seeds[name])
            lockstep.begin(name)
            draws[name] = []
            for _ in range(steps[name]):
                order.append(name)
                draws[name].append(float(torch.rand(1)))
                lockstep.step(name)
        finally:
            lockstep.end(name)

    threads = [threading.Thread(target=run, args=(name,)) for name in ("b", "a")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads)
    assert order == ["a", "b", "a", "b", "a", "b", "a", "b", "b", "b"]
    for name in ("a", "b"):
        alone = torch.Generator().manual_seed(seeds[name])
        assert draws[name] == [float(torch.rand(1, generator=alone)) for _ in range(steps[name])]


def test_lockstep_lets_the_other_run_on_when_one_fails_before_training():
    bench = _load("bench_train")
    lockstep = bench.Lockstep("a", "b")
    finished = []

    def failing() -> None:
        lockstep.enter_setup("a")
        lockstep.end("a")  # raised while loading: the setup lock is released and b is not kept waiting

    def other() -> None:
        lockstep.enter_setup("b")
        lockstep.begin("b")
        lockstep.step("b")
        lockstep.end("b")
        finished.append("b")

    threads = [threading.Thread(target=failing), threading.Thread(target=other)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert finished == ["b"]


def test_live_reads_are_charged_to_the_timed_steps_they_ran_in(tmp_path):
    """A read at step k runs in step k+1's interval: of reads at 2, 10, 20 and 33 in a 33-step run with 3 warm-up
    steps, the timed window (steps 3-32) pays the reads at 10 and 20: (0.5 + 0.1) / 30 s a step; every read is
    listed, the first (the worker's start-up) included."""
    import json

    bench = _load("bench_train")
    (tmp_path / "pgrpo").mkdir()
    reads = [{"step": 2, "seconds": 0.9}, {"step": 10, "seconds": 0.5}, {"step": 20, "seconds": 0.1},
             {"step": 33, "seconds": 0.2}]
    (tmp_path / "pgrpo" / "live.json").write_text(json.dumps({"live": {"reads": reads}}))
    assert bench.live_reads(tmp_path) == [(2.0, 0.9), (10.0, 0.5), (20.0, 0.1), (33.0, 0.2)]
    assert bench.live_read_seconds(bench.live_reads(tmp_path), 3, 33) == pytest.approx(0.6 / 30)
    assert bench.live_reads(tmp_path / "nowhere") == []
