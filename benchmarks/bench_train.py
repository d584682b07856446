r"""The workflow's GRPO step (``pgrpo train``) against a plain TRL ``GRPOTrainer``, side by side, one torch thread.

    python benchmarks/bench_train.py [--config config/config.yaml] [--model-dir results/model/tiny] \
        [--data-dir results/data/synthetic] [--G 4] [--steps N] [--warmup 3] [--rounds 2] [--no-levers]

Both trainers get the same model, dataset, reward (:func:`pgrpo.grpo.rewards.accuracy_reward`), LoRA and the
``GRPOConfig`` that :func:`pgrpo.grpo.training_config.build_grpo_config` builds from the config's ``training:``
section (batch, G, completion length, num_iterations, temperature, beta, epsilon, seed), with evaluation off in both
(``eval_steps: 0``), no checkpoint inside the timed steps and no merge. The workflow's run is ``run_train`` itself
(its subclass with the IS-ratio recorder, the step log fsynced per step, the effective-step and live callbacks, its
progress bar); the plain one is ``trl.GRPOTrainer(model, reward_funcs, args, train_dataset, processing_class,
peft_config)`` with transformers' default callbacks. Both get one extra callback that stamps every optimizer step's
end (``on_step_end``), so a step's time is everything between two stamps (generation, reward, loss, backward,
optimizer, logging, callbacks, the live read); the first ``--warmup`` steps are skipped and the default window is one
whole cycle of the live read. The two run in lockstep in one process (:class:`Lockstep`: the workflow in the main
thread, plain TRL in a second one, one optimizer step each in turn, each with its own random state, so both see the
same machine and sample the same completions, which the script checks), ``--rounds`` times with the first to step
alternating. It prints each run's mean, median and best CPU seconds per step (``time.process_time``; wall seconds
beside), the CPU seconds spent in generation, the live reads' share (and a read after the first, the worker's
start-up apart, against issue 20's 1% target), and the ratio of the mean CPU seconds per step
(the workflow's overhead: the target is <= 1.10). See docs/performance.md ("The trainer against plain TRL").

Then the generation levers (``--no-levers`` skips them): TRL's ``model.generate`` call on one generation batch of
the tiny model (``per_device_train_batch_size`` completions of ``max_completion_length`` tokens, the sampling
settings TRL passes), timed as TRL runs it (dynamic cache, all groups in one batch) and with each lever: one
``generate`` per group instead of one per batch, ``cache_implementation="static"``, and a static cache with
``torch.compile`` (transformers compiles the decoding step when the cache is static and compilation is allowed;
TRL's GenerationConfig sets ``disable_compile=True``). Each is the best of ``--repeats`` calls in CPU seconds after
a first call (its wall seconds, compilation included, printed beside).

The model: ``--model-dir`` (the workflow's warm-started tiny model, results/model/tiny, after ``make run``), else
the config's ``models.tiny.path`` if it exists, else an untrained Qwen2 of the config's ``tiny.architecture``
(random weights: it rarely samples the end-of-sequence token, so every completion has the full length, an upper
bound on the generation's share). The output names which.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import best_of, steady_state  # noqa: E402

from pgrpo.grpo.data import read_jsonl  # noqa: E402
from pgrpo.grpo.tiny_model import DEFAULT_TINY, build_model, build_tokenizer  # noqa: E402
from pgrpo.stages.model import run_make_synthetic  # noqa: E402

TARGET_RATIO = 1.10


def rng_state() -> tuple:
    import numpy as np
    import torch

    return torch.get_rng_state(), random.getstate(), np.random.get_state()


def set_rng_state(state: tuple) -> None:
    import numpy as np
    import torch

    torch.set_rng_state(state[0])
    random.setstate(state[1])
    np.random.set_state(state[2])


class Lockstep:
    """Two trainers in two threads taking optimizer steps in turn, so both see the same machine (a shared machine's
    load changes over seconds; one run after the other would not). Each runs alone: the other waits at its step's
    end. Each keeps its own global random state (torch, numpy, random), saved at its turn's end and restored at its
    next turn's start, and sets up alone (:meth:`enter_setup` to ``on_train_begin``: loading, TRL's seeding, the LoRA
    weights' draw), so each samples what it would sample alone."""

    def __init__(self, first: str, second: str):
        self.names = (first, second)
        self.turn = first
        self.done: set[str] = set()
        self.arrived: set[str] = set()
        self.states: dict[str, tuple] = {}
        self.condition = threading.Condition()
        self.setup = threading.Lock()
        self.holder: str | None = None

    def enter_setup(self, name: str) -> None:
        self.setup.acquire()
        self.holder = name
    def _other(self, name: str) -> str:
        return self.names[1] if name == self.names[0] else self.names[0]

    def _wait_turn(self, name: str) -> None:
        self.condition.wait_for(lambda: self.turn == name or self._other(name) in self.done)
        set_rng_state(self.states[name])

    def begin(self, name: str) -> None:
        self.states[name] = rng_state()
        self.holder = None
        self.setup.release()
        with self.condition:
            self.arrived.add(name)
            self.condition.notify_all()
            self.condition.wait_for(lambda: len(self.arrived | self.done) == 2)
            self._wait_turn(name)

    def step(self, name: str) -> None:
        with self.condition:
            self.states[name] = rng_state()
            self.turn = self._other(name)
            self.condition.notify_all()
            self._wait_turn(name)

    def end(self, name: str) -> None:
        """``name`` has finished (or failed): the other steps on alone."""
        if self.holder == name:
            self.holder = None
            self.setup.release()
        with self.condition:
            self.done.add(name)
            self.turn = self._other(name)
            self.condition.notify_all()


def step_clock_class():
    """A callback stamping each optimizer step's end on two clocks: ``wall`` (``time.perf_counter``) and ``cpu``
    (``time.process_time``, the process's CPU seconds) hold the seconds of each step (from the stamp at which its
    turn began); ``generation`` the CPU seconds of TRL's ``_generate_single_turn`` within each step; ``lengths`` the
    mean completion length TRL logs per step (the same in both runs when they sample the same completions)."""
    from transformers import TrainerCallback

    class StepClock(TrainerCallback):
        def __init__(self, name: str, lockstep: Lockstep):
            self.name, self.lockstep = name, lockstep
            self.wall: list[float] = []
            self.cpu: list[float] = []
            self.generation: list[float] = []
            self.lengths: list[float] = []
            self.pending_generation = 0.0
            self.last = (0.0, 0.0)

        def on_train_begin(self, args, state, control, **kwargs):
            self.lockstep.begin(self.name)
            self.last = (time.perf_counter(), time.process_time())

        def on_step_end(self, args, state, control, **kwargs):
            now = (time.perf_counter(), time.process_time())
            self.wall.append(now[0] - self.last[0])
            self.cpu.append(now[1] - self.last[1])
            self.generation.append(self.pending_generation)
            self.pending_generation = 0.0
            self.lockstep.step(self.name)
            self.last = (time.perf_counter(), time.process_time())

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "completions/mean_length" in logs:
                self.lengths.append(float(logs["completions/mean_length"]))

    return StepClock


def clocked(trainer_class, clock):
    """``trainer_class`` with ``clock`` added as a callback and its generation timed (the same in both runs)."""

    class Clocked(trainer_class):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.add_callback(clock)

        def _generate_single_turn(self, *args, **kwargs):
            start = time.process_time()
            try:
                return super()._generate_single_turn(*args, **kwargs)
            finally:
                clock.pending_generation += time.process_time() - start

    return Clocked


def run_workflow(model_dir: str, data: dict, training: dict, G: int, seed: int, out: Path, clock) -> None:
    """``pgrpo train``'s ``run_train`` (in the main thread: it installs signal handlers) with ``clock``."""
    from pgrpo.grpo import trainer as trainer_module
    from pgrpo.stages.train import run_train

    original = trainer_module._trainer_class
    trainer_module._trainer_class = lambda: clocked(original(), clock)
    clock.lockstep.enter_setup(clock.name)
    try:
        run_train(model={"name": "tiny", "path": model_dir}, data=data, training=training, G=G, seed=seed,
                  out_dir=str(out))
    finally:
        trainer_module._trainer_class = original


def run_plain(model_dir: str, data: dict, training: dict, G: int, seed: int, out: Path, clock) -> None:
    """A plain ``trl.GRPOTrainer`` (its own class, transformers' default callbacks) with the same model, data,
    reward, LoRA and GRPOConfig, with ``clock``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOTrainer

    from pgrpo.grpo.data import load_problems
    from pgrpo.grpo.rewards import accuracy_reward
    from pgrpo.grpo.training_config import build_grpo_config, build_lora_config, resolve_training, validate_training

    clock.lockstep.enter_setup(clock.name)
    resolved = validate_training(resolve_training(training), G, num_processes=1, cuda=False, bf16_supported=False)
    torch.set_num_threads(resolved["resources"]["threads"])
    dataset = load_problems(data["train"], "train")
    args = build_grpo_config(resolved, G, seed, str(out), has_eval=False, cuda=False)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    trainer = clocked(GRPOTrainer, clock)(
        model=model, reward_funcs=[accuracy_reward], args=args, train_dataset=dataset, processing_class=tokenizer,
        peft_config=build_lora_config(resolved["lora"]),
    )
    trainer.train()


def run_pair(model_dir: str, data: dict, training: dict, G: int, seed: int, work: Path, first: str) -> dict:
    """One round: the workflow (main thread: it installs signal handlers) and plain TRL (a second thread) in
    lockstep, ``first`` stepping first; returns their clocks by name. The reward is the same function in both, so it
    must cost the same: math-verify's parsing timeout (SIGALRM, set up per call: about 1 ms a completion) works in
    the main thread only, so it is off in both for the round (it never fires on these completions)."""
    lockstep = Lockstep(first, "plain" if first == "workflow" else "workflow")
    clocks = {name: step_clock_class()(name, lockstep) for name in ("workflow", "plain")}
    errors: list[BaseException] = []

    def plain() -> None:
        try:
            run_plain(model_dir, data, training, G, seed, work / f"G{G}.{first}.plain", clocks["plain"])
        except BaseException as error:  # noqa: BLE001 - re-raised in the main thread
            errors.append(error)
        finally:
            lockstep.end("plain")

    from pgrpo.grpo import answer_check

    work.mkdir(parents=True, exist_ok=True)
    timeout = answer_check._timeout
    answer_check._timeout = lambda: None  # math-verify's SIGALRM timeout: main thread only, off in both runs
    log = work / "trainers.log"  # both trainers' progress bars and prints (plain TRL prints every log dict)
    try:
        with open(log, "w") as handle, contextlib.redirect_stdout(handle), contextlib.redirect_stderr(handle):
            thread = threading.Thread(target=plain, name="plain-trl")
            thread.start()
            try:
                run_workflow(model_dir, data, training, G, seed, work / f"G{G}.{first}.workflow",
                             clocks["workflow"])
            finally:
                lockstep.end("workflow")
                thread.join()
        if errors:
            raise errors[0]
    except BaseException:
        print("".join(log.read_text().splitlines(keepends=True)[-40:]), file=sys.stderr)
        raise
    finally:
        answer_check._timeout = timeout
    return clocks


def live_reads(out: Path) -> list[tuple[float, float]]:
    """(step, seconds) of each of the workflow's live reads (``pgrpo/live.json``)."""
    import json

    path = out / "pgrpo" / "live.json"
    reads = json.loads(path.read_text()).get("live", {}).get("reads", []) if path.is_file() else []
    return [(float(r["step"]), float(r.get("seconds") or 0.0)) for r in reads]


def live_read_seconds(reads: list[tuple[float, float]], warmup: int, steps: int) -> float:
    """Seconds per timed step that the live reads (:func:`live_reads`) took: a read at step k runs in step k+1's
    interval, so the reads at steps ``warmup`` to ``steps - 1``."""
    return sum(sec for step, sec in reads if warmup <= step < steps) / (steps - warmup)


def compare(model_dir: str, data: dict, training: dict, G: int, seed: int, rounds: int, warmup: int,
            work: Path) -> float:
    """``rounds`` lockstep rounds (the first to step alternates); print each run and the ratio of their mean CPU
    seconds per step, wall seconds beside."""
    cpu: dict[str, list[float]] = {"workflow": [], "plain": []}
    wall: dict[str, list[float]] = {"workflow": [], "plain": []}
    live: list[float] = []
    later_reads: list[float] = []
    first_reads: list[float] = []
    same = True
    for r in range(rounds):
        clocks = run_pair(model_dir, data, training, G, seed, work / f"round{r}", ("workflow", "plain")[r % 2])
        same = same and clocks["workflow"].lengths == clocks["plain"].lengths
        reads = live_reads(work / f"round{r}" / f"G{G}.{('workflow', 'plain')[r % 2]}.workflow")
        live.append(live_read_seconds(reads, warmup, len(clocks["workflow"].cpu)))
        first_reads += [sec for _, sec in reads[:1]]
        later_reads += [sec for _, sec in reads[1:]]
        for kind, clock in clocks.items():
            times, wall_times = steady_state(clock.cpu, warmup), steady_state(clock.wall, warmup)
            generation = statistics.fmean(clock.generation[warmup:])
            cpu[kind].append(times.mean)
            wall[kind].append(wall_times.mean)
            print(f"  round {r} {kind:8s}: {times.mean:.3f} CPU s/step mean, {times.median:.3f} median, "
                  f"{times.best:.3f} best (steps {warmup + 1}-{warmup + times.steps}); generation {generation:.3f} "
                  f"({generation / times.mean:.0%}); wall {wall_times.mean:.3f} s/step; completion length "
                  f"{statistics.fmean(clock.lengths):.2f}", flush=True)
    ratio = statistics.fmean(cpu["workflow"]) / statistics.fmean(cpu["plain"])
    wall_ratio = statistics.fmean(wall["workflow"]) / statistics.fmean(wall["plain"])
    per_round = ", ".join(f"{a / b:.3f}" for a, b in zip(cpu["workflow"], cpu["plain"]))
    verdict = "within" if ratio <= TARGET_RATIO else "over"
    completions = "the same completions in both" if same else "DIFFERENT completions (unequal work compared)"
    live_share = statistics.fmean(live) / statistics.fmean(cpu["plain"])
    print(f"  of the difference, the live reads (pgrpo/live.json's seconds of the reads in the timed steps): "
          f"{statistics.fmean(live):.3f} s/step, {live_share:.1%} of plain TRL's step", flush=True)
    if later_reads:
        from pgrpo.grpo.training_config import resolve_training

        every = int(resolve_training(training)["live"]["every"])
        read = statistics.fmean(later_reads)
        print(f"  a live read after the first: {read:.3f} s mean, {statistics.median(later_reads):.3f} s median "
              f"(first read {statistics.fmean(first_reads):.3f} s: the worker's start-up, paid once); at every={every}, "
              f"{read / (every * statistics.fmean(cpu['plain'])):.1%} of plain TRL's step for logs of up to "
              f"{len(clocks['workflow'].cpu)} rows (a read grows with the log: benchmarks/live/bench_overhead.py "
              f"--rows; issue 20's target: under 1% at every=10; in the background, on a spare core, the trainer's "
              f"thread pays only the hand-off)", flush=True)
    print(f"G={G}: pgrpo train / plain TRL = {ratio:.3f}x CPU seconds per optimizer step (per round {per_round}; "
          f"wall {wall_ratio:.3f}x); {completions}; target <= {TARGET_RATIO:.2f}x: {verdict}", flush=True)
    return ratio


def generation_batch(model_dir: str, data: dict, training: dict, G: int):
    """(model, tokenizer, input_ids, attention_mask, TRL's generation kwargs) for one generation batch as TRL builds
    it: ``per_device_train_batch_size / G`` prompts, each repeated G times, left-padded."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from pgrpo.grpo.chat import add_stop_tokens
    from pgrpo.grpo.data import load_problems
    from pgrpo.grpo.training_config import PINNED_OBJECTIVE, resolve_training

    t = resolve_training(training)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(model_dir, padding_side="left")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    stops = add_stop_tokens(model, tokenizer, False)
    prompts = load_problems(data["train"], "train")["prompt"][: t["per_device_train_batch_size"] // G]
    batch = tokenizer([p for p in prompts for _ in range(G)], return_tensors="pt", padding=True)
    kwargs = dict(max_new_tokens=t["max_completion_length"], do_sample=True, pad_token_id=tokenizer.pad_token_id,
                  bos_token_id=tokenizer.bos_token_id, eos_token_id=stops or tokenizer.eos_token_id,
                  temperature=float(t["temperature"]), top_p=PINNED_OBJECTIVE["top_p"],
                  top_k=PINNED_OBJECTIVE["top_k"], min_p=PINNED_OBJECTIVE["min_p"],
                  repetition_penalty=PINNED_OBJECTIVE["repetition_penalty"])
    model.eval()
    return model, tokenizer, batch["input_ids"], batch["attention_mask"], kwargs


def generation_levers(model_dir: str, data: dict, training: dict, G: int, repeats: int) -> None:
    """Time TRL's generate call on one generation batch, as TRL runs it and with each lever."""
    import torch
    from transformers import CompileConfig, GenerationConfig

    model, _, ids, mask, kwargs = generation_batch(model_dir, data, training, G)

    def generate(config, rows=slice(None)):
        with torch.no_grad():
            return model.generate(input_ids=ids[rows], attention_mask=mask[rows], generation_config=config)

    def timed(name, config, calls=None):
        calls = calls or [slice(None)]
        run = lambda: [generate(config, rows) for rows in calls]  # noqa: E731
        torch.manual_seed(0)
        start = time.perf_counter()
        run()
        first = time.perf_counter() - start
        torch.manual_seed(0)
        seconds, outs = best_of(repeats, run, clock=time.process_time)
        tokens = sum(int(o.shape[1] - ids.shape[1]) for o in outs)
        return name, seconds, first, tokens

    trl_config = GenerationConfig(**kwargs, disable_compile=True)
    static = GenerationConfig(**kwargs, cache_implementation="static", disable_compile=True)
    compile_config = CompileConfig(mode="default")  # reduce-overhead (transformers' default) is CUDA graphs
    compile_config._compile_all_devices = True  # transformers compiles on CUDA/XPU only unless told (its own flag)
    compiled = GenerationConfig(**kwargs, cache_implementation="static", compile_config=compile_config)
    per_group = [slice(i, i + G) for i in range(0, ids.shape[0], G)]
    rows = [timed("TRL's call: dynamic cache, all groups in one batch", trl_config),
            timed(f"one generate per group ({len(per_group)} calls of {G})", trl_config, per_group),
            timed("static cache (cache_implementation='static')", static)]
    try:
        rows.append(timed("static cache + torch.compile", compiled))
    except Exception as error:  # noqa: BLE001 - a compiler missing here is a result, not a crash
        print(f"  static cache + torch.compile: failed ({type(error).__name__}: {str(error).splitlines()[0][:120]})")
    base = rows[0][1]
    print(f"generation levers: one generation batch of {ids.shape[0]} completions (prompt width {ids.shape[1]}, up "
          f"to {kwargs['max_new_tokens']} new tokens), CPU seconds, best of {repeats} after a first call (wall, "
          "compilation included):")
    for name, seconds, first, tokens in rows:
        print(f"  {name:52s} {seconds * 1e3:8.1f} ms  ({base / seconds:.2f}x TRL's; first call {first:.2f} s; "
              f"{tokens} decoding steps)")


def prepare(options, work: Path) -> tuple[str, str, dict, dict]:
    """(model dir, what it is, data specs, training section); a model or data built here goes under ``work``."""
    import yaml

    config = yaml.safe_load(Path(options.config).read_text())
    data_dir = Path(options.data_dir or "results/data/synthetic")
    if not (data_dir / "train.jsonl").is_file():
        data_dir = work / "data"
        run_make_synthetic(str(data_dir), {"sizes": {"sft": 200, "val": 50, "train": 400, "test": 64}})
    data = {"train": {"path": str(data_dir / "train.jsonl")}}
    model_dir = options.model_dir or (config.get("models", {}).get("tiny", {}) or {}).get("path")
    if model_dir and (Path(model_dir) / "config.json").is_file():
        what = f"the warm-started tiny model in {model_dir}"
    else:
        if options.model_dir:
            raise SystemExit(f"--model-dir {options.model_dir}: no config.json there")
        texts = [r["question"] + " " + r["answer"] for r in read_jsonl(data_dir / "train.jsonl")]
        tiny = config.get("tiny") or {}
        tokenizer = build_tokenizer(texts, (tiny.get("tokenizer") or {}).get("vocab_size", 512))
        model = build_model(tokenizer, tiny.get("architecture") or DEFAULT_TINY["architecture"])
        model_dir = str(work / "model")
        model.save_pretrained(model_dir)
        tokenizer.save_pretrained(model_dir)
        what = "an untrained Qwen2 of tiny.architecture (random weights: full-length completions)"
    training = copy.deepcopy(config.get("training") or {})
    training.update(max_steps=options.steps, eval_steps=0, eval_on_start=False, merge_adapters=False,
                    checkpoint_steps=options.steps + 1, report_to="none")
    training["resources"] = {**training.get("resources", {}), "threads": 1}
    return model_dir, what, data, training


def live_cycle(config_path: str) -> int:
    """Optimizer steps between two live reads that both forecast (``training.live.every`` x the callback's
    ``forecast_every``): a timed window of this many steps pays the live reads at their long-run rate."""
    import inspect

    import yaml

    from pgrpo.live.callback import DynamicsCallback
    from pgrpo.grpo.training_config import resolve_training

    training = resolve_training((yaml.safe_load(Path(config_path).read_text()) or {}).get("training"))
    forecast_every = inspect.signature(DynamicsCallback).parameters.get("forecast_every")
    every = int(training["live"]["every"])
    return every * (int(forecast_every.default) if forecast_every is not None else 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="config/config.yaml")
    parser.add_argument("--model-dir")
    parser.add_argument("--data-dir")
    parser.add_argument("--G", type=int, nargs="+", default=[4])
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--steps", type=int, help="optimizer steps per run, warm-up included (default: the warm-up "
                        "and one whole cycle of the live read, training.live.every x its forecast_every)")
    parser.add_argument("--warmup", type=int, default=3, help="first steps left out of the timing")
    parser.add_argument("--rounds", type=int, default=2, help="pairs of runs (the order alternates)")
    parser.add_argument("--repeats", type=int, default=5, help="generate calls per lever (the best counts)")
    parser.add_argument("--no-levers", action="store_true", help="skip the generation levers")
    parser.add_argument("--no-compare", action="store_true", help="skip the trainer comparison")
    options = parser.parse_args()
    import torch

    if options.steps is None:
        options.steps = options.warmup + live_cycle(options.config)

    torch.set_num_threads(1)
    scratch = tempfile.TemporaryDirectory(prefix="bench_train.")
    work = Path(scratch.name)
    model_dir, what, data, training = prepare(options, work)
    print(f"model: {what}; config {options.config} training section, {options.steps} steps a run "
          f"(first {options.warmup} not timed), batch {training.get('per_device_train_batch_size')}, completion "
          f"length {training.get('max_completion_length')}, evaluation off in both, torch threads 1", flush=True)
    for G in options.G:
        if not options.no_compare:
            compare(model_dir, data, training, G, options.seed, options.rounds, options.warmup, work)
        if not options.no_levers:
            generation_levers(model_dir, data, training, G, options.repeats)
    scratch.cleanup()


if __name__ == "__main__":
    main()
