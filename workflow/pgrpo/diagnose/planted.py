"""Planted synthetic GRPO logs with known failures, for the diagnose benchmark (:mod:`pgrpo.diagnose.benchmark`) and
its tests; the failure modes are those of :mod:`pgrpo.diagnose.modes` (Figures 2-5 and beyond).

Each log is a TRL ``log_history`` (a list of dicts, the format ``trainer_state.json`` holds) simulated from the GRPO
mechanics the diagnostics read, not drawn as curves: per step, ``P`` prompts of varied difficulty (logit offset
``d ~ N(0, 1.5)`` around the run's success logit ``logit p(t)``), ``G`` binary completions each, so ``reward`` is the
batch mean, ``reward_std`` the batch s.d. and ``frac_reward_zero_std`` the share of prompts whose ``G`` rewards are
equal (saturation at high ``p``, a stuck run at low ``p``, with no extra rule); completion lengths are drawn around a
mean and cut at the cap (``completions/clipped_ratio``, ``completions/mean_length``); entropy, KL and grad_norm are
planted curves with multiplicative noise. The planted truth of every mode (``label``, ``onset_step``, ``reason``) is
returned with the log, in the layout of ``benchmarks/forecast/data/labels.json``.

Ringing runs take the success probability from the exact delayed heavy-ball map of Theorem 7's setting
(:func:`pgrpo.theory.closed_forms.discrete_trajectory`, ``e_{k+1} = e_k - eta K e_{k-K_ref} + mu (e_k - e_{k-1})``) at
``zeta < 1``; their period is that of the map's dominant root (``planted_period``), their settings are in ``meta``.
Labels may carry ``episodes`` (``[{start, end}]``, ``end`` null: lasting), scored by overlap.

``planted_logs(seed)`` returns every case; the seed is fixed by the benchmark (``SEED``).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from pgrpo.diagnose.modes.record import MODES  # the modes the labels cover

SEED = 20260101


def three_phase(t: np.ndarray, r0: float, r_inf: float, omega: float) -> np.ndarray:
    """Eq. 16 from rest: ``R_inf - (R_inf - R0)(1 + w t) exp(-w t)``."""
    return r_inf - (r_inf - r0) * (1 + omega * t) * np.exp(-omega * t)


def simulate(rng: np.random.Generator, n: int, p: Callable[[np.ndarray], np.ndarray], G: int = 8, prompts: int = 16,
             every: int = 1, entropy: Callable | None = None, kl: Callable | None = None,
             grad: Callable | None = None, length: Callable | None = None, cap: int = 1024,
             eval_p: Callable | None = None, eval_every: int = 20, zero_grad_when_uniform: bool = False,
             ) -> list[dict[str, Any]]:
    """One run's log_history (see the module docstring); ``every``: logging interval in steps."""
    steps = np.arange(every, n + 1, every, dtype=float)
    p_t = np.clip(p(steps), 1e-4, 1 - 1e-4)
    history = []
    for i, step in enumerate(steps):
        offsets = rng.normal(0, 1.5, prompts)
        logit = math.log(p_t[i] / (1 - p_t[i]))
        probs = 1 / (1 + np.exp(-(logit + offsets)))
        wins = rng.binomial(G, probs)
        rewards = np.concatenate([np.r_[np.ones(k), np.zeros(G - k)] for k in wins])
        entry: dict[str, Any] = {"step": int(step), "epoch": round(float(step) / n, 6), "loss": 0.0,
                                 "reward": float(rewards.mean()), "reward_std": float(rewards.std(ddof=1)),
                                 "rewards/correct/mean": float(rewards.mean()),
                                 "rewards/correct/std": float(rewards.std(ddof=1)),
                                 "frac_reward_zero_std": float(np.mean((wins == 0) | (wins == G))),
                                 "learning_rate": 1e-6}
        if length is not None:
            drawn = rng.normal(length(np.array([step]))[0], 0.2 * length(np.array([step]))[0], prompts * G)
            cut = np.clip(drawn, 5, cap)
            entry["completions/mean_length"] = float(cut.mean())
            entry["completions/clipped_ratio"] = float(np.mean(drawn >= cap))
        if entropy is not None:
            entry["entropy"] = float(entropy(np.array([step]))[0] * rng.lognormal(0, 0.05))
        if kl is not None:
            entry["kl"] = float(max(kl(np.array([step]))[0] * rng.lognormal(0, 0.1), 0.0))
        if grad is not None:
            entry["grad_norm"] = float(grad(np.array([step]))[0] * rng.lognormal(0, 0.25))
            if zero_grad_when_uniform and entry["frac_reward_zero_std"] >= 1.0:
                entry["grad_norm"] = 0.0
        history.append(entry)
        if eval_p is not None and int(step) % eval_every == 0:
            q = float(np.clip(eval_p(np.array([step]))[0], 0, 1))
            history.append({"step": int(step), "epoch": entry["epoch"],
                            "eval_reward": float(rng.binomial(400, q) / 400), "eval_loss": 0.0})
    return history


def _labels(reason: str, **truth: Any) -> dict[str, dict[str, Any]]:
    """All modes False (with ``reason``) unless given: ``mode=(label, onset)``, ``mode=(label, onset, episodes)``
    or ``mode=None`` (unknown)."""
    out = {}
    for mode in MODES:
        value = truth.get(mode, (False, None))
        if value is None:
            out[mode] = {"label": None, "onset_step": None, "reason": "column not logged"}
        else:
            out[mode] = {"label": value[0], "onset_step": value[1], "reason": reason}
            if len(value) > 2:
                out[mode]["episodes"] = [{"start": a, "end": b} for a, b in value[2]]
    return out


def planted_period(eta: float, mu: float, K: float, k_ref: int) -> float:
    """The period (steps) of the exact delayed map's dominant root: ``2 pi / |arg z|``."""
    from pgrpo.theory.closed_forms import discrete_map_regime

    root = discrete_map_regime(eta, mu, K, k_ref).dominant_root
    return 2 * math.pi / abs(math.atan2(root.imag, root.real))


def _ringing(r0: float, r_inf: float, n: int, eta: float, mu: float, K: float, k_ref: int
             ) -> Callable[[np.ndarray], np.ndarray]:
    """The exact delayed heavy-ball map from rest at step 0, read at any logged step."""
    from pgrpo.theory.closed_forms import discrete_trajectory

    path = discrete_trajectory(r0, r_inf, n, eta, mu, K, k_ref)
    return lambda t: path[np.clip(np.asarray(t, int), 0, n)]


def _const(value: float) -> Callable[[np.ndarray], np.ndarray]:
    return lambda t: np.full(np.shape(t), value, float)


def _step(before: float, after: float, at: float, width: float = 5.0) -> Callable[[np.ndarray], np.ndarray]:
    """A smooth step from ``before`` to ``after`` centred just after ``at`` (it starts at ``at``)."""
    return lambda t: before + (after - before) / (1 + np.exp(-(np.asarray(t, float) - at - 2 * width) / width))


def _rise(r0: float, r_inf: float, omega: float) -> Callable[[np.ndarray], np.ndarray]:
    return lambda t: three_phase(np.asarray(t, float), r0, r_inf, omega)


def planted_logs(seed: int = SEED) -> dict[str, dict[str, Any]]:
    """``{name: {"log_history": [...], "labels": {...}, "meta": {...}, "notes": str}}`` for every planted case."""
    rng = np.random.default_rng(seed)
    cases: dict[str, dict[str, Any]] = {}

    def add(name: str, history: list[dict[str, Any]], labels: dict, notes: str, **meta: Any) -> None:
        cases[name] = {"log_history": history, "labels": labels, "meta": meta, "notes": notes}

    healthy = dict(entropy=_step(1.0, 0.75, 150, 30), kl=lambda t: 0.05 * np.asarray(t) / 300,
                   grad=_const(0.8), length=_const(220.0))
    add("planted_healthy", simulate(rng, 300, _rise(0.25, 0.75, 0.025), **healthy),
        _labels("healthy: reward 0.25 -> 0.75 (three-phase), entropy -25%, KL to 0.05"),
        "a healthy run, logged every step", max_completion_length=1024, G=8)
    add("planted_healthy_saturated_g2", simulate(rng, 300, _rise(0.55, 0.95, 0.03), G=2, prompts=32, **healthy),
        _labels("solved task: reward 0.93 at G = 2, most groups all-correct (frac_reward_zero_std ~0.85)"),
        "saturation, not degeneracy", max_completion_length=1024, G=2)
    add("planted_healthy_every5_no_kl", simulate(rng, 400, _rise(0.2, 0.7, 0.02), every=5, G=4,
                                                 entropy=_step(1.1, 0.9, 200, 40), grad=_const(1.0),
                                                 length=_const(300.0)),
        _labels("healthy, logged every 5 steps, beta = 0 (no kl)"), "every 5 steps, no KL",
        max_completion_length=1024, G=4)
    add("planted_healthy_with_eval", simulate(rng, 300, _rise(0.2, 0.8, 0.03), eval_p=_rise(0.1, 0.5, 0.03),
                                              **healthy),
        _labels("train and eval co-saturate (same omega)"), "eval every 20 steps", max_completion_length=1024, G=8)
    add("planted_stuck_at_zero", simulate(rng, 300, _const(1e-4), entropy=_const(0.9), kl=_const(0.001),
                                          grad=_const(0.05), length=_const(150.0), zero_grad_when_uniform=True),
        _labels("reward ~0, every group all-wrong: stuck; grad_norm 0 at the zero-spread steps",
                degeneracy=(True, 1), no_learning=(True, None), instability=(True, 1)),
        "a sparse reward that never fires", max_completion_length=1024, G=8)
    add("planted_no_learning_400", simulate(rng, 400, _const(0.45), **healthy),
        _labels("reward flat at 0.45 for 400 steps", no_learning=(True, None)), "never moves",
        max_completion_length=1024, G=8)
    add("planted_entropy_collapse_early", simulate(rng, 300, _rise(0.2, 0.45, 0.008), entropy=_step(1.2, 0.15, 60, 8),
                                                   kl=lambda t: 0.1 * np.asarray(t) / 300, grad=_const(0.8),
                                                   length=_const(200.0)),
        _labels("entropy 1.2 -> 0.15 from step 60, long before the reward saturates",
                concentration=(True, 60)), "collapse before saturation", max_completion_length=1024, G=8)
    add("planted_entropy_drop_after_saturation",
        simulate(rng, 300, _rise(0.2, 0.85, 0.05), entropy=_step(1.0, 0.35, 180, 8),
                 kl=lambda t: 0.1 * np.asarray(t) / 300, grad=_const(0.8), length=_const(200.0)),
        _labels("entropy -65% from step 180, after the reward reached its plateau (~step 80): benign sharpening"),
        "benign concentration", max_completion_length=1024, G=8)
    crash = _step(0.85, 0.003, 150, 3)
    add("planted_entropy_explosion", simulate(rng, 200, crash, entropy=_step(0.11, 4.3, 150, 4), grad=_const(0.5),
                                              length=_step(300.0, 900.0, 150, 4), cap=512),
        _labels("entropy 0.11 -> 4.3 from step 150 while the reward falls to 0 and completions hit the cap",
                concentration=(True, 150), instability=(True, 150), regression=(True, 150),
                degeneracy=(True, 150), truncation=(True, 150)),
        "a divergence (no kl logged)", max_completion_length=512, G=8)
    peak_fall = lambda t: np.where(np.asarray(t) < 150, three_phase(np.asarray(t, float), 0.2, 0.8, 0.04),  # noqa
                                   0.8 - 0.64 * (1 - np.exp(-(np.asarray(t, float) - 150) / 25)))
    add("planted_regression_at_cap", simulate(rng, 300, peak_fall, entropy=_const(0.8), kl=lambda t: 0.1 * np.asarray(t) / 300,
                                              grad=_const(0.8), length=_step(250.0, 700.0, 150, 5), cap=512),
        _labels("reward peaks at 0.8 (step 150) then falls by 80% while completions sit at the 512 cap",
                regression=(True, 150), truncation=(True, 150)), "peak, fall, cap", max_completion_length=512, G=8)
    add("planted_truncation_only", simulate(rng, 300, _rise(0.2, 0.75, 0.03), entropy=_const(0.9),
                                            kl=lambda t: 0.05 * np.asarray(t) / 300, grad=_const(0.8),
                                            length=_step(200.0, 560.0, 100, 8), cap=512),
        _labels("healthy reward, completions cut at the 512 cap from step ~100", truncation=(True, 100)),
        "length grows into the cap", max_completion_length=512, G=8)
    spiky = np.array([130, 134, 139, 145, 152])
    add("planted_grad_spikes", simulate(rng, 300, _rise(0.2, 0.75, 0.03), entropy=_const(0.9),
                                        kl=lambda t: 0.05 * np.asarray(t) / 300,
                                        grad=lambda t: np.where(np.isin(np.asarray(t), spiky), 30.0, 0.8),
                                        length=_const(200.0)),
        _labels("grad_norm 30x its level at 5 steps within 22 steps from step 130", instability=(True, 130)),
        "a burst of spikes", max_completion_length=1024, G=8)
    dip = lambda t: np.where((np.asarray(t) >= 200) & (np.asarray(t) < 215), 0.25,  # noqa
                             three_phase(np.asarray(t, float), 0.2, 0.75, 0.03))
    add("planted_kl_spike_crash", simulate(rng, 300, dip, entropy=_const(0.9),
                                           kl=lambda t: np.where(np.asarray(t) == 200, 6.0, 0.04), grad=_const(0.8),
                                           length=_const(200.0)),
        _labels("KL 6.0 at step 200 (150x) with the reward crashing for 15 steps, then recovering",
                instability=(True, 200)), "one spike with a crash", max_completion_length=1024, G=8)
    add("planted_isolated_spike", simulate(rng, 300, _rise(0.2, 0.75, 0.03), entropy=_const(0.9),
                                           kl=lambda t: np.where(np.asarray(t) == 100, 1.5, 0.04),
                                           grad=lambda t: np.where(np.asarray(t) == 100, 20.0, 0.8),
                                           length=_const(200.0)),
        _labels("one grad_norm/KL spike at step 100 with no effect on the reward"), "isolated spike",
        max_completion_length=1024, G=8)
    add("planted_kl_high_benign", simulate(rng, 300, _rise(0.2, 0.75, 0.03), entropy=_const(0.9),
                                           kl=lambda t: 0.6 * np.asarray(t) / 300, grad=_const(0.8),
                                           length=_const(200.0)),
        _labels("KL rises smoothly to 0.6 (small beta), the reward rises: a policy shift, healthy"),
        "high but smooth KL", max_completion_length=1024, G=8)
    add("planted_hacking_eval_flat", simulate(rng, 300, _rise(0.2, 0.8, 0.03), eval_p=_const(0.3), **healthy),
        _labels("train reward 0.2 -> 0.8 while the eval reward stays at 0.3", hacking=(True, 30)),
        "train rises, eval flat", max_completion_length=1024, G=8)
    _new_modes(rng, add, healthy)
    return cases


def _new_modes(rng: np.random.Generator, add: Callable, healthy: dict[str, Any]) -> None:
    """Oscillation (rings from the exact map, a wobble within the noise, a refresh sawtooth) and the length modes."""
    for name, (eta, mu, k_ref, n, every) in {"planted_ringing_zeta012": (0.03, 0.9, 2, 300, 1),
                                             "planted_ringing_zeta004": (0.02, 0.95, 2, 300, 1),
                                             "planted_ringing_every5": (0.01, 0.96, 3, 600, 5)}.items():
        from pgrpo.theory.closed_forms import coefficients

        period, zeta = planted_period(eta, mu, 1.0, k_ref), coefficients(eta, mu, 1.0, k_ref).zeta
        add(name, simulate(rng, n, _ringing(0.2, 0.6, n, eta, mu, 1.0, k_ref), every=every, **healthy),
            _labels(f"exact map of Theorem 7 at eta {eta}, mu {mu}, K 1, K_ref {k_ref}: zeta {zeta:.3f}, "
                    f"period {period:.1f} steps", oscillation=(True, every)),
            f"rings, period {period:.1f}", max_completion_length=1024, G=8, eta=eta, mu=mu, k_ref=k_ref, K=1.0,
            planted_period=period)
    wobble = lambda t: three_phase(np.asarray(t, float), 0.2, 0.7, 0.03) + 0.004 * np.sin(2 * np.pi * np.asarray(t) / 40)  # noqa
    add("planted_plateau_wobble", simulate(rng, 300, wobble, **healthy),
        _labels("healthy rise with a 0.004 wobble of period 40, far within the batch noise (s.d. ~0.05)"),
        "a wobble within the noise", max_completion_length=1024, G=8)
    saw = lambda t: three_phase(np.asarray(t, float), 0.2, 0.65, 0.03) + 0.12 * ((np.asarray(t) % 50) / 50 - 0.5)  # noqa
    add("planted_refresh_sawtooth", simulate(rng, 300, saw, **healthy),
        _labels("the reference model is synced every 50 steps (ref_model_sync_steps 50): a sawtooth of period 50, "
                "the refresh's, not ringing"),
        "a sawtooth from a periodic refresh", max_completion_length=1024, G=8, ref_model_sync_steps=50,
        sync_ref_model=True)
    add("planted_length_collapse", simulate(rng, 300, _const(0.35), entropy=_const(0.9), kl=lambda t: 0.05 * np.asarray(t) / 300,
                                            grad=_const(0.8), length=_step(400.0, 110.0, 100, 6)),
        _labels("mean length 400 -> 110 tokens from step 100 while the reward stays at 0.35",
                length_collapse=(True, 100, [(100, None)]), no_learning=(True, None)),
        "length collapse", max_completion_length=1024, G=8)
    add("planted_concise_learning", simulate(rng, 300, _rise(0.2, 0.75, 0.03), entropy=_const(0.9),
                                             kl=lambda t: 0.05 * np.asarray(t) / 300, grad=_const(0.8),
                                             length=_step(400.0, 150.0, 80, 10)),
        _labels("the reward rises 0.2 -> 0.75 while completions get shorter (400 -> 150): concision, healthy"),
        "shorter and better", max_completion_length=1024, G=8)
    shape = lambda t: 1 - (1 + 0.015 * np.asarray(t, float)) * np.exp(-0.015 * np.asarray(t, float))  # noqa
    add("planted_length_hacking", simulate(rng, 300, lambda t: 0.2 + 0.35 * shape(t), entropy=_const(0.9),
                                           kl=lambda t: 0.05 * np.asarray(t) / 300, grad=_const(0.8),
                                           length=lambda t: 200 + 500 * shape(t)),
        _labels("the reward 0.2 -> 0.55 tracks the mean length 200 -> 700 (reward per token falls 20%)",
                length_hacking=(True, 40, [(40, None)])),
        "the reward rises with the length", max_completion_length=1024, G=8)
