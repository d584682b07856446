"""Stage ``forecast_benchmark`` (beyond the paper; the laws of Section 3.5, Eq. 14-16, against the baselines a user
would pick): the corpus, in three parts with their provenance, the protocol of :mod:`pgrpo.fit.benchmark`, and the
per-forecast CSV, the Markdown summary and the figure, written atomically.

(a) ``workflow``: the workflow's own runs, ``{model}/G{G}/seed{seed}/log.csv`` (every seed, G and column);
(b) ``bandit``: the exact softmax bandit (:func:`pgrpo.bandit.simulate`, G -> infinity) and the finite-G bandit
    (:func:`pgrpo.bandit.finite_g.simulate_finite_g`) over :data:`BANDIT_SETTINGS`, G in {4, 16}, two seeds; each
    run as long as it takes the exact curve to make 90% of its rise at 15/30/50/70% of the run (cycled), logged at
    <= 300 points, the logged value the mean of B = 32 completions drawn from the step's policy (binomial around p),
    an eval column at every 12th logged point the mean of 384;
(c) ``real``: public TRL GRPO logs (``benchmarks/forecast/data/``: source and license in ``SOURCES.md``, the
    dev/holdout split in ``labels.json``, fixed before any method was tuned);
(d) ``closed-form``: the generated families of :func:`pgrpo.fit.truth.closed_form_families` (true mean known, each
    family a sweep), and ``bandit sweep``: the exact bandit over the ``calib`` settings' (eta, K_ref, mu) grid at one
    length (:data:`SWEEP_STEPS`), a sweep. Every bandit curve's truth is its own policy's expected reward ``p(t)``
    (for a finite-G run: that run's, without the logging noise);
(e) ``kref sweep``: the deep-network K_ref sweep of the main job, each arm's grid runs a sweep
    (:func:`kref_sweep_corpus`).

Methods and levers are chosen on ``dev``; ``holdout`` is reported apart. The bandit's and the workflow's splits use
the real corpus's rule on the setting's (run's) name: ``sha1 % 3 == 0`` -> holdout.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from pgrpo.errors import InputError
from pgrpo.fit.benchmark import Curve, default_methods, forecaster_method, run_protocol, summarize
from pgrpo.fit.family_oracle import BanditSetting
from pgrpo.fit.forecaster import ForecasterSettings, RunContext
from pgrpo.fit.staged import reward_components
from pgrpo.grpo.run_log import reward_function_columns
from pgrpo.stages.diagnose_benchmark import CORPUS_META_FILES, declared_ranges
from pgrpo.stages.logs import read_run_log

#: the ``forecast_benchmark`` config section's defaults
DEFAULTS: dict[str, Any] = {"data_dir": "benchmarks/forecast/data", "fractions": [0.1, 0.25, 0.5],
                            "bandit_settings": None, "levers": True, "closed_form": True, "bandit_sweep": True}


#: (name, rewards, eta, mu, K_ref, beta): overdamped to oscillatory, slow to fast, three reward shapes
BANDIT_SETTINGS: tuple[tuple[str, tuple[float, ...], float, float, int, float], ...] = (
    ("calib_eta0.003_mu0.9_k1", (0, 0, 0, 0, 0, 0, 1.666, 1.666), 0.003, 0.9, 1, 1.0),
    ("calib_eta0.02_mu0.9_k1", (0, 0, 0, 0, 0, 0, 1.666, 1.666), 0.02, 0.9, 1, 1.0),
    ("calib_eta0.05_mu0.8_k2", (0, 0, 0, 0, 0, 0, 1.666, 1.666), 0.05, 0.8, 2, 1.0),
    ("calib_eta0.1_mu0.9_k8", (0, 0, 0, 0, 0, 0, 1.666, 1.666), 0.1, 0.9, 8, 1.0),
    ("calib_eta0.3_mu0.8_k1", (0, 0, 0, 0, 0, 0, 1.666, 1.666), 0.3, 0.8, 1, 1.0),
    ("calib_eta0.01_mu0_k0", (0, 0, 0, 0, 0, 0, 1.666, 1.666), 0.01, 0.0, 0, 1.0),
    ("calib_eta0.03_mu0.5_k4_beta2", (0, 0, 0, 0, 0, 0, 1.666, 1.666), 0.03, 0.5, 4, 2.0),
    ("calib_eta0.2_mu0.9_k4_beta0.5", (0, 0, 0, 0, 0, 0, 1.666, 1.666), 0.2, 0.9, 4, 0.5),
    ("sparse_eta0.01_mu0.9_k1", (0, 0, 0, 0, 0, 0, 0, 1), 0.01, 0.9, 1, 0.5),
    ("sparse_eta0.05_mu0.9_k2", (0, 0, 0, 0, 0, 0, 0, 1), 0.05, 0.9, 2, 0.5),
    ("sparse_eta0.2_mu0.8_k4", (0, 0, 0, 0, 0, 0, 0, 1), 0.2, 0.8, 4, 0.5),
    ("sparse_eta0.002_mu0_k0_beta0.3", (0, 0, 0, 0, 0, 0, 0, 1), 0.002, 0.0, 0, 0.3),
    ("half_eta0.005_mu0.9_k1", (0, 0, 0, 0, 1, 1, 1, 1), 0.005, 0.9, 1, 1.0),
    ("half_eta0.05_mu0.5_k8", (0, 0, 0, 0, 1, 1, 1, 1), 0.05, 0.5, 8, 1.0),
    ("half_eta0.02_mu0.9_k2_beta2", (0, 0, 0, 0, 1, 1, 1, 1), 0.02, 0.9, 2, 2.0),
    ("half_eta0.1_mu0.8_k1_beta0.5", (0, 0, 0, 0, 1, 1, 1, 1), 0.1, 0.8, 1, 0.5),
)


#: where the exact curve makes 90% of its rise, as a share of the run (cycled over the settings): users stop a run
#: some time after its plateau, some sooner, some later
T90_SHARES = (0.15, 0.3, 0.5, 0.7)


MIN_STEPS, MAX_STEPS, MAX_POINTS = 60, 3000, 300


BANDIT_BATCH, EVAL_EVERY_POINTS, EVAL_BATCH = 32, 12, 384


GROUP_SIZES, SEEDS = (4, 16), (0, 1)

#: the workflow's columns (binary reward and accuracy: both live in [0, 1])
WORKFLOW_COLUMNS: tuple[str, ...] = ("reward", "eval_reward", "eval_accuracy")


#: Adam's beta1 and TRL's on-policy refresh (K_ref = 1) where a public log does not say otherwise (Eq. 9 needs them)
TRL_DEFAULT_MU, TRL_DEFAULT_K_REF = 0.9, 1.0


#: the fewest logged points a column needs to be a curve of the corpus
MIN_POINTS = 12


_RUN = re.compile(r"(?P<model>[^/]+)/G(?P<G>\d+)/seed(?P<seed>\d+)/log\.csv$")


def split_of(name: str) -> str:
    """The real corpus's split rule: ``holdout`` iff ``sha1(name) % 3 == 0``."""
    return "holdout" if int(hashlib.sha1(name.encode()).hexdigest(), 16) % 3 == 0 else "dev"


def workflow_corpus(logs: Sequence[str | Path]) -> list[Curve]:
    """Every ``{model}/G{G}/seed{seed}/log.csv`` of ``logs``, every column of :data:`WORKFLOW_COLUMNS` with enough
    points that is not a copy of one taken before it (a binary reward's eval accuracy is its eval reward); the
    reward curve carries the eval reward as its eval column; the runs of one model (all G and seeds) are one group
    (Prop. 10). Split: :func:`split_of` the run's ``model/G/seed``."""
    curves: list[Curve] = []
    for log in sorted(Path(p) for p in logs):
        match = _RUN.search(log.as_posix())
        if not match:
            continue
        model, G, seed = match["model"], int(match["G"]), int(match["seed"])
        frame, meta, context, batch = _run_log(log)
        taken: list[tuple[np.ndarray, np.ndarray]] = []
        for column in WORKFLOW_COLUMNS:
            if column not in frame.columns:
                continue
            t, y = _finite(frame["step"], frame[column])
            if t.size < MIN_POINTS or _same_as_any(t, y, taken):
                continue  # too short, or a copy of a column already taken (a binary reward's eval accuracy)
            taken.append((t, y))
            eval_steps = eval_values = None
            if column == "reward" and "eval_reward" in frame.columns:
                eval_steps, eval_values = _finite(frame["step"], frame["eval_reward"])
            curves.append(Curve(
                id=f"{model}/G{G}/seed{seed}/{column}", part="workflow", split=split_of(f"{model}/G{G}/seed{seed}"),
                column=column, steps=t, values=y,
                context=RunContext(context.reward_range, batch if column == "reward" else None, context.mu,
                                   context.k_ref),
                provenance={"source": str(log), "model": model, "G": G, "seed": seed,
                            "eta": meta.get("eta"), "mu": meta.get("mu"), "k_ref": meta.get("k_ref")},
                group=model, eval_steps=eval_steps, eval_values=eval_values))
    return with_seed_references(curves)


def with_seed_references(curves: list[Curve]) -> list[Curve]:
    """Each workflow curve with the mean of the same column of the runs of its model and G at the other seeds
    (issue 21: where a run has seeds, its forecast is also scored against the other seeds' mean), on the steps all
    of them logged; a run with no other seed, or no common steps, has none."""
    for curve in curves:
        others = [c for c in curves if c is not curve and c.column == curve.column
                  and c.provenance.get("model") == curve.provenance.get("model")
                  and c.provenance.get("G") == curve.provenance.get("G")
                  and c.provenance.get("seed") != curve.provenance.get("seed")]
        if not others:
            continue
        steps = others[0].steps
        for other in others[1:]:
            steps = np.intersect1d(steps, other.steps)
        if steps.size < MIN_POINTS:
            continue
        mean = np.mean([other.values[np.searchsorted(other.steps, steps)] for other in others], axis=0)
        curve.seed_reference = (steps, mean)
    return curves


def _run_log(log: Path) -> tuple[Any, dict[str, Any], RunContext, float | None]:
    """A workflow run's log, its ``meta.json`` beside it (or nothing), its context (a binary reward: range [0, 1],
    the completions per step, Eq. 9's ``mu`` and ``K_ref``) and its completions per step."""
    meta_path = log.parent / "meta.json"
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    frame = read_run_log(log)
    batch = None
    try:
        batch = float(meta["per_device_train_batch_size"]) * float(meta.get("gradient_accumulation_steps", 1))
    except (KeyError, TypeError, ValueError):
        pass
    context = RunContext(reward_range=(0.0, 1.0), batch=batch, mu=_num(meta.get("mu")), k_ref=_num(meta.get("k_ref")))
    return frame, meta, context, batch


_KREF_RUN = re.compile(r"kref_sweep/(?P<arm>[^/]+)/(?P<run>[^/]+)/log\.csv$")


def kref_sweep_corpus(logs: Sequence[str | Path]) -> list[Curve]:
    """The deep-network K_ref sweep of the main job (``results/kref_sweep/{arm}/{run}/log.csv``, issue 21's
    decisions within a sweep): each arm's grid runs' reward curves (the baseline, which measures K, is not one of
    the grid's), the runs of one arm and length a sweep; split by :func:`split_of` the arm's name, so an arm's
    runs are compared within one split."""
    curves: list[Curve] = []
    for log in sorted(Path(p) for p in logs):
        match = _KREF_RUN.search(log.as_posix())
        if not match or match["run"] == "baseline":
            continue
        arm, run = match["arm"], match["run"]
        frame, meta, context, _ = _run_log(log)
        if "reward" not in frame.columns:
            continue
        t, y = _finite(frame["step"], frame["reward"])
        if t.size < MIN_POINTS:
            continue
        curves.append(Curve(
            id=f"kref/{arm}/{run}/reward", part="kref sweep", split=split_of(f"kref_sweep/{arm}"), column="reward",
            steps=t, values=y, context=context,
            provenance={"source": str(log), "arm": arm, "run": run, "eta": meta.get("eta"), "mu": meta.get("mu"),
                        "k_ref": meta.get("k_ref")}))

    def arm_and_length(curve: Curve) -> tuple[str, str]:
        name = f"kref/{curve.provenance['arm']}/reward@{curve.steps[-1]:g}"
        return name, name

    return with_sweeps(curves, arm_and_length)


def real_corpus(data_dir: str | Path) -> list[Curve]:
    """Every public log ``<name>.json`` under ``data_dir`` (read by :func:`pgrpo.stages.logs.read_run_log`): its reward
    curve, and its eval reward where it has at least :data:`MIN_POINTS` points; split and provenance from
    ``labels.json`` (a log it does not label: :func:`split_of` its file name, the rule the labels follow) and the
    file's ``source``. A log's declared range is its source's (``ranges.json``,
    :func:`pgrpo.stages.diagnose_benchmark.declared_ranges`: the reward's and each reward function's); Eq. 9's
    ``mu`` and ``K_ref`` are TRL's defaults; runs of one study are a sweep (:func:`with_study_sweeps`); a reward
    curve whose reward functions add up to it (:func:`pgrpo.fit.staged.reward_components`) carries them, each with
    its declared range as a term of the reward, for the per-function method. No folder: no curves."""
    root = Path(data_dir)
    if not root.is_dir():
        return []
    labels_path = root / "labels.json"
    labels = json.loads(labels_path.read_text()) if labels_path.is_file() else {}
    ranges = declared_ranges(root)
    curves: list[Curve] = []
    for path in sorted(root.glob("*.json")):
        if path.name in CORPUS_META_FILES:
            continue
        raw = json.loads(path.read_text())
        frame = read_run_log(path)
        info = raw if isinstance(raw, dict) else {}
        split = (labels.get(path.name) or {}).get("split", split_of(path.name))
        task = str(info.get("task", ""))
        source_ranges = ranges.get(path.name) or {}
        declared = source_ranges.get("reward_range")
        functions = {fn: frame[c].to_numpy(float) for fn, c in reward_function_columns(frame.columns).items()}
        parts = (reward_components(frame["step"].to_numpy(float), frame["reward"].to_numpy(float), functions)
                 if "reward" in frame.columns else None)
        term_ranges = (parts.weighted_ranges(source_ranges.get("reward_function_ranges") or {}) if parts is not None
                       else {})
        for column in ("reward", "eval_reward"):
            if column not in frame.columns:
                continue
            t, y = _finite(frame["step"], frame[column])
            if t.size < MIN_POINTS:
                continue
            components = ({fn: (ct, cy, term_ranges.get(fn)) for fn, (ct, cy) in parts.series.items()}
                          if column == "reward" and parts is not None and len(parts.series) >= 2 else None)
            curves.append(Curve(
                id=f"{path.stem}/{column}", part="real", split=split, column=column, steps=t, values=y,
                context=RunContext(reward_range=tuple(declared) if declared else None, mu=TRL_DEFAULT_MU,
                                   k_ref=TRL_DEFAULT_K_REF),
                provenance={"source": info.get("source", {}), "model": info.get("model"), "task": task,
                            "file": path.name}, components=components))
    return with_study_sweeps(curves)


def with_study_sweeps(curves: list[Curve]) -> list[Curve]:
    """The real logs that are runs of one study, as a sweep: the same author (the file name's first word), column,
    length (last step) and split, two runs or more; the sweep's name says each (a study with runs in both splits
    is two sweeps)."""
    def study(curve: Curve) -> tuple[tuple, str]:
        author = curve.id.split("/")[0].split("_")[0]
        return ((author, curve.column, float(curve.steps[-1]), curve.split),
                f"real/{author}/{curve.column}@{float(curve.steps[-1]):g}/{curve.split}")

    return with_sweeps(curves, study)


def with_sweeps(curves: list[Curve], group_of: Callable[[Curve], tuple[Any, str]]) -> list[Curve]:
    """``curves`` with ``sweep`` set to its group's name where the group (``group_of(curve)``: its key and name) has
    two runs or more; a run alone is no sweep (its ``sweep`` left as it is)."""
    groups: dict[Any, list[Curve]] = {}
    names: dict[Any, str] = {}
    for curve in curves:
        key, name = group_of(curve)
        groups.setdefault(key, []).append(curve)
        names[key] = name
    for key, members in groups.items():
        if len(members) >= 2:
            for curve in members:
                curve.sweep = names[key]
    return curves


def _observe(p: np.ndarray, r_max: float, batch: int, rng: np.random.Generator) -> np.ndarray:
    """The mean of ``batch`` two-level rewards {0, r_max} at success probability ``p / r_max``."""
    return r_max * rng.binomial(batch, np.clip(p / r_max, 0.0, 1.0)) / batch


def run_length(rewards: np.ndarray, eta: float, mu: float, k_ref: int, beta: float, share: float) -> int:
    """Steps such that the exact curve makes 90% of its rise at ``share`` of the run (within the step limits)."""
    from pgrpo import bandit

    long = bandit.simulate(rewards, eta, mu, beta, k_ref, 20000)
    start, end = float(long[0]), float(np.mean(long[-2000:]))
    progress = (long - start) / (end - start) if end != start else np.ones_like(long)
    return int(np.clip(round(int(np.argmax(progress >= 0.9)) / share), MIN_STEPS, MAX_STEPS))


def finite_g_simulator() -> tuple[Callable | None, str]:
    """``simulate_finite_g`` and where it came from (None: the exact bandit stands in, said in the notes)."""
    try:
        from pgrpo.bandit.finite_g import simulate_finite_g
    except ImportError:
        return None, "none: the exact bandit with binomial observation noise stands in for the finite-G runs"
    return simulate_finite_g, "pgrpo.bandit.finite_g.simulate_finite_g"


def bandit_corpus(settings: Sequence[tuple] = BANDIT_SETTINGS, simulator: Callable | None = None,
                  origin: str | None = None) -> tuple[list[Curve], list[str]]:
    """Part (b): per setting the exact curve and the finite-G runs (see the module docstring); the finite-G
    ``simulator`` defaults to :func:`finite_g_simulator`'s."""
    from pgrpo import bandit

    if simulator is None:
        simulator, origin = finite_g_simulator()
    notes = [f"finite-G bandit: {origin}"]
    curves: list[Curve] = []
    for index, (name, rewards, eta, mu, k_ref, beta) in enumerate(settings):
        r = np.asarray(rewards, float)
        r_max = float(r.max())
        steps = run_length(r, eta, mu, k_ref, beta, T90_SHARES[index % len(T90_SHARES)])
        every = max(1, int(math.ceil(steps / MAX_POINTS)))
        t = np.arange(0, steps + 1, every, dtype=float)
        runs = [("exact", None, None, bandit.simulate(r, eta, mu, beta, k_ref, steps))]
        for G in GROUP_SIZES:
            if simulator is not None:
                p = simulator(r, eta, mu, beta, k_ref, steps, G, len(SEEDS), seed=1000 + index)
                runs += [(f"G{G}", G, seed, p[i]) for i, seed in enumerate(SEEDS)]
            else:
                runs += [(f"G{G}", G, seed, runs[0][3]) for seed in SEEDS]
        for tag, G, seed, p in runs:
            rng = np.random.default_rng([index, G or 0, seed or 0, 7])
            p = np.asarray(p)[t.astype(int)]
            curves.append(Curve(
                truth=p.astype(float),
                id=f"bandit/{name}/{tag}" + (f"/seed{seed}" if seed is not None else ""), part="bandit",
                split=split_of(name), column="reward", steps=t, values=_observe(p, r_max, BANDIT_BATCH, rng),
                context=RunContext(reward_range=(float(r.min()), r_max), batch=BANDIT_BATCH, mu=mu, k_ref=k_ref),
                provenance={"setting": f"{name}: rewards={list(rewards)}, eta={eta}, mu={mu}, K_ref={k_ref}, "
                                       f"beta={beta}, G={G or 'inf'}, seed={seed}, B={BANDIT_BATCH}, "
                                       f"{steps} steps logged every {every}",
                            "source": "pgrpo.bandit.simulate" if G is None else origin},
                group=f"bandit/{name}", eval_steps=t[::EVAL_EVERY_POINTS],
                eval_values=_observe(p[::EVAL_EVERY_POINTS], r_max, EVAL_BATCH, rng),
                bandit_setting=BanditSetting(tuple(map(float, rewards)), mu, beta, k_ref) if G is None
                or simulator is not finite_g_simulator()[0] else BanditSetting(
                    tuple(map(float, rewards)), mu, beta, k_ref, G, eta, 1000 + index, len(SEEDS),
                    SEEDS.index(seed))))
    return curves, notes


#: the bandit sweep's length and logging interval
SWEEP_STEPS, SWEEP_EVERY = 400, 2


def bandit_sweep_corpus(settings: Sequence[tuple] = BANDIT_SETTINGS) -> list[Curve]:
    """The exact bandit over the ``calib`` settings (one reward vector, the (eta, mu, K_ref, beta) grid) for
    :data:`SWEEP_STEPS` steps each, logged as in part (b): one sweep, its runs compared with one another."""
    from pgrpo import bandit

    curves = []
    t = np.arange(0, SWEEP_STEPS + 1, SWEEP_EVERY, dtype=float)
    for index, (name, rewards, eta, mu, k_ref, beta) in enumerate(settings):
        if not name.startswith("calib"):
            continue
        r = np.asarray(rewards, float)
        p = np.asarray(bandit.simulate(r, eta, mu, beta, k_ref, SWEEP_STEPS), float)[t.astype(int)]
        rng = np.random.default_rng([index, 17])
        curves.append(Curve(
            id=f"bandit-sweep/{name}", part="bandit sweep", split=split_of("bandit-sweep"), column="reward", steps=t,
            values=_observe(p, float(r.max()), BANDIT_BATCH, rng), truth=p,
            context=RunContext(reward_range=(float(r.min()), float(r.max())), batch=BANDIT_BATCH, mu=mu, k_ref=k_ref),
            provenance={"setting": f"{name}: eta={eta}, mu={mu}, K_ref={k_ref}, beta={beta}, {SWEEP_STEPS} steps",
                        "source": "pgrpo.bandit.simulate"}, sweep="bandit-sweep/calib",
            bandit_setting=BanditSetting(tuple(map(float, rewards)), mu, beta, k_ref)))
    return curves


def closed_form_corpus(seed: int = 0) -> list[Curve]:
    """Part (d): :func:`pgrpo.fit.truth.closed_form_families` as curves (reward range [0, 1], B = 32; a two-stage
    curve carries its two reward functions with their ranges). Split: :func:`split_of` the family's name (the
    whole sweep on one side)."""
    from pgrpo.fit.truth import FAMILY_BATCH, closed_form_families

    curves = []
    for g in closed_form_families(seed):
        components = ({fn: (ct, cy, r_range) for fn, (ct, cy, _, r_range) in g.components.items()}
                      if g.components else None)
        curves.append(Curve(
            id=f"closed-form/{g.family}/{g.member}", part="closed-form", split=split_of(f"closed-form/{g.family}"),
            column="reward", steps=g.steps, values=g.values, truth=g.truth,
            context=RunContext(reward_range=(0.0, 1.0), batch=FAMILY_BATCH),
            provenance={"setting": f"{g.family} / {g.member}", "source": "pgrpo.fit.truth.closed_form_families"},
            sweep=f"closed-form/{g.family}", family=g.family, components=components))
    return curves


def lever_variants(default: ForecasterSettings) -> dict[str, ForecasterSettings]:
    """Each lever of the forecaster switched against its default (named by what the variant does)."""
    def name(flag: bool, on: str, off: str) -> str:
        return f"forecaster: {off if flag else on}"

    def toggle_law(law: str) -> ForecasterSettings:
        """The default without ``law`` where it has it, else with it."""
        laws = default.laws
        return default.replace(laws=tuple(x for x in laws if x != law) if law in laws else (*laws, law))

    return {
        name(default.theory, "+ Eq. 9-10 law (K from the early slope)", "- Eq. 9-10 law"):
            default.replace(theory=not default.theory),
        name(default.pool, "+ pooled runs across G, seeds (Prop. 10)", "- pooled runs"):
            default.replace(pool=not default.pool),
        name(default.binomial_noise, "+ binomial noise sqrt(p(1-p)/B)", "- binomial noise"):
            default.replace(binomial_noise=not default.binomial_noise),
        name(default.averaging == "akaike", "Akaike averaging", "best law only"):
            default.replace(averaging="akaike" if default.averaging == "best" else "best"),
        name(default.range_prior, "+ range prior", "- range prior"): default.replace(range_prior=not default.range_prior),
        name(default.eval_column, "+ eval column", "- eval column"): default.replace(eval_column=not default.eval_column),
        name(default.deviation, "+ run's own deviation (OU)", "- run's own deviation (OU)"):
            default.replace(deviation=not default.deviation),
        name("two_mode" in default.laws, "+ two-mode law", "- two-mode law"): toggle_law("two_mode"),
        name("power_tail" in default.laws, "+ power-law tail (softmax PG's O(1/t))", "- power-law tail"):
            toggle_law("power_tail"),
        name(default.slowest_rate is not None, "+ window-bounded time scale", "- window-bounded time scale"):
            default.replace(slowest_rate=None if default.slowest_rate is not None else 0.25),
        **{f"forecaster: guard {mode}" if mode != "off" else "forecaster: - level guard (the law mixture alone)":
           default.replace(guard=mode) for mode in ("off", "points", "blend", "excess", "switch") if mode != default.guard},
        name(default.flat_level == "smoothed", "flat law at the smoothed end level", "flat law at the window's mean"):
            default.replace(flat_level="mean" if default.flat_level == "smoothed" else "smoothed"),
        name(default.drift > 0, "+ drift (s.d. 0.5 x the residual's at h = W, growing as sqrt(h / W))", "- drift"):
            default.replace(drift=0.0 if default.drift > 0 else 0.5),
        name(default.residual_drift, "+ the residuals' own drift (a random walk, exponential smoothing's variance)",
             "- the residuals' own drift"): default.replace(residual_drift=not default.residual_drift),
        name(default.headroom, "+ headroom of a reward not yet rising (declared range)", "- headroom of a reward not "
             "yet rising"): default.replace(headroom=not default.headroom),
        **{f"forecaster: point forecast {center}": default.replace(center=center)
           for center in ("auto", "draws", "best", "recenter") if center != default.center},
    }


def run_forecast_benchmark_all(section: Mapping[str, Any] | None, logs: Sequence[str], out_csv: str, out_md: str,
                               out_png: str | None = None, data_dir: str | None = None,
                               simulator: Callable | None = None, origin: str | None = None,
                               progress: Callable[[str], None] | None = None,
                               kref_logs: Sequence[str] = (), workers: int = 1) -> dict[str, Any]:
    """The whole benchmark of the ``forecast_benchmark`` config section: the corpus parts (a part without data is
    "not run"; ``kref_logs``: the K_ref sweep's runs), the forecaster with its kept levers, the baselines, the levers
    switched; the curves scored on ``workers`` processes (:mod:`pgrpo.parallel`)."""
    unknown = sorted(set(section or {}) - set(DEFAULTS))
    if unknown:
        raise InputError(f"config key 'forecast_benchmark.{unknown[0]}' is not a known key "
                         f"(allowed: {', '.join(DEFAULTS)})")
    cfg = {**DEFAULTS, **(section or {})}
    notes: list[str] = []
    own = workflow_corpus(logs)
    notes.append(f"(a) workflow runs: {len({c.provenance['source'] for c in own})} logs, {len(own)} curves" if own
                 else "(a) workflow runs: not run (no log.csv with enough steps given)")
    settings = BANDIT_SETTINGS if cfg["bandit_settings"] is None else BANDIT_SETTINGS[:int(cfg["bandit_settings"])]
    bandit, bandit_notes = bandit_corpus(settings, simulator, origin) if settings else ([], [])
    notes.append(f"(b) bandit: {len(settings)} settings, {len(bandit)} curves; " + "; ".join(bandit_notes)
                 if bandit else "(b) bandit: not run")
    folder = data_dir or cfg["data_dir"]
    real = real_corpus(folder)
    notes.append(f"(c) real public logs: {len(real)} curves from {folder}" if real
                 else f"(c) real public logs: not run (no logs under {folder})")
    generated = closed_form_corpus() if cfg["closed_form"] else []
    sweep = bandit_sweep_corpus(settings) if cfg["bandit_sweep"] and settings else []
    notes.append(f"(d) closed-form families: {len(generated)} curves in {len({c.sweep for c in generated})} sweeps, "
                 f"true mean known; bandit sweep: {len(sweep)} exact runs of one (eta, K_ref, mu) grid"
                 if generated or sweep else "(d) closed-form families: not run")
    kref = kref_sweep_corpus(kref_logs)
    notes.append(f"(e) the K_ref sweep of the main job: {len(kref)} grid runs in {len({c.sweep for c in kref if c.sweep})}"
                 " sweeps (one per arm and length)" if kref else "(e) the K_ref sweep: not run (no grid run given)")
    default = ForecasterSettings()
    levers = ({name: forecaster_method(s) for name, s in lever_variants(default).items()} if cfg["levers"]
              else None)
    return run_forecast_benchmark(own + bandit + real + generated + sweep + kref, default_methods(default), out_csv, out_md,
                                  out_png, fractions=cfg["fractions"], levers=levers, notes=notes, progress=progress,
                                  lever_parts=("workflow", "bandit", "real"), workers=workers)


def _num(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _same_as_any(t: np.ndarray, y: np.ndarray, taken: Sequence[tuple[np.ndarray, np.ndarray]]) -> bool:
    """Whether ``(t, y)`` repeats a curve already taken (same steps, same values): scored twice it would count
    one curve twice in the medians."""
    return any(np.array_equal(t, ot) and np.allclose(y, oy, rtol=0, atol=1e-12) for ot, oy in taken)


def _finite(steps: Any, values: Any) -> tuple[np.ndarray, np.ndarray]:
    t, y = np.asarray(steps, float), np.asarray(values, float)
    keep = np.isfinite(t) & np.isfinite(y)
    return t[keep], y[keep]


def run_forecast_benchmark(corpus: Sequence[Curve], methods: Mapping[str, Callable], out_csv: str, out_md: str,
                           out_png: str | None = None, fractions: Sequence[float] = (0.1, 0.25, 0.5),
                           levers: Mapping[str, Callable] | None = None, lever_fraction: float = 0.25,
                           notes: Sequence[str] = (), progress: Callable[[str], None] | None = None,
                           lever_parts: Sequence[str] | None = None, workers: int = 1) -> dict[str, Any]:
    """Score ``methods`` on ``corpus`` at each fraction (and the lever variants ``levers`` at ``lever_fraction``) on
    ``workers`` processes, write the rows (CSV), the summary (Markdown, with ``notes``) and the figure; return rows
    and summary."""
    import pandas as pd

    from pgrpo.atomic import write_csv, write_text
    from pgrpo.tables.forecast_benchmark import benchmark_markdown

    if not corpus:
        raise InputError("the forecast benchmark corpus is empty")
    rows = run_protocol(corpus, methods, fractions, progress=progress, workers=workers)
    lever_rows: list[dict[str, Any]] = []
    if levers:
        lever_corpus = [c for c in corpus if lever_parts is None or c.part in lever_parts]
        lever_rows = run_protocol(lever_corpus, {"persistence": methods["persistence"], **levers}, [lever_fraction],
                                  progress=progress, workers=workers)
        lever_rows = [r for r in lever_rows if r.get("method") != "persistence"]
    summary = summarize(rows)
    lever_summary = summarize(lever_rows + [r for r in rows if r.get("fraction") == lever_fraction]) if levers else []
    frame = pd.DataFrame(rows + [{**r, "lever": True} for r in lever_rows])
    write_csv(out_csv, frame)
    parts = {curve.part for curve in corpus}
    provenance = [{"id": c.id, "part": c.part, "split": c.split, **{k: v for k, v in c.provenance.items()
                                                                     if k in ("source", "file", "setting")}}
                  for c in corpus]
    write_text(out_md, benchmark_markdown(summary, lever_summary, sorted(parts), list(notes), provenance,
                                          fractions))
    if out_png:
        from pgrpo.figures.forecasts import benchmark_figure
        from pgrpo.figures.style import save_pdf_png

        save_pdf_png(benchmark_figure(summary, lever_fraction), None, out_png)
    return {"rows": rows, "summary": summary, "lever_summary": lever_summary}

