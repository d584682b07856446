"""Reward hacking (Section 5.2, Figure 2): the doubly normalised progress of Eq. 17 for train and eval, the deficit
below the diagonal, and the rolling coupling ratio ``rho(t) = lambda_eval(t) / |lambda_train(t)|``.

Without an eval column, a reward made of two or more functions (TRL logs each as ``rewards/<fn>/mean``) has its
held-out curve in the function that scores the task itself (:func:`held_out_column`: the declared
``gold_reward``, else the one function whose name says so): a reward that rises through its format terms while
that gold term stays put is the hacking signature of Figure 2 with the gold term as the eval curve.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from pgrpo.diagnose.numerics import fit_noise, fit_summary, fit_three_phase_curve, fmt, least_squares_line, smooth
from pgrpo.diagnose.records import (
    CO_SATURATING,
    HACKING,
    INCONCLUSIVE,
    NOT_RUN,
    REWARD_HACKING,
    DiagnosticResult,
    RunCurves,
)
from pgrpo.diagnose.modes.no_learning import rise, rise_test
from pgrpo.diagnose.modes.signals import components, curve
from pgrpo.diagnose.settings import DiagnosticsConfig, RewardHackingConfig
from pgrpo.grpo.run_log import REWARD_FUNCTION_MEAN


def normalized_progress(values: np.ndarray, r0: float, r_inf: float) -> np.ndarray:
    """Eq. 17: ``u = (R - R0) / (R_inf - R0)``."""
    return (np.asarray(values, float) - r0) / (r_inf - r0)


def local_relaxation_rate(steps: np.ndarray, values: np.ndarray, r_inf: float, min_points: int = 3) -> float:
    """Least-squares slope of ``-log(R_inf - R)`` on the step (Eq. 14: the relaxation rate ``lambda``); points with
    ``R_inf - R <= 0`` are dropped; NaN with fewer than ``min_points`` usable points or one distinct step."""
    steps = np.asarray(steps, float)
    gap = r_inf - np.asarray(values, float)
    keep = np.isfinite(steps) & np.isfinite(gap) & (gap > 0)
    if keep.sum() < max(min_points, 2):
        return float("nan")
    slope, _, _ = least_squares_line(steps[keep], -np.log(gap[keep]))
    return slope


@dataclass
class CouplingRatio:
    """``rho(t) = lambda_eval(t) / |lambda_train(t)|`` in windows centred on each eval step (Figure 2, row 2)."""

    centers: np.ndarray
    rho: np.ndarray
    lambda_train: np.ndarray
    lambda_eval: np.ndarray
    window_steps: float


def rolling_coupling_ratio(
    train_steps: Sequence[float], train_values: Sequence[float], train_r_inf: float,
    eval_steps: Sequence[float], eval_values: Sequence[float], eval_r_inf: float,
    window_fraction: float = 0.45, min_points: int = 3,
) -> CouplingRatio:
    """The rolling coupling ratio of Section 5.2: for each eval step ``c`` the window ``[c - w/2, c + w/2]`` with
    ``w = window_fraction x (last eval step - first eval step)``; ``lambda`` regressed separately on the train and the
    eval points inside it (:func:`local_relaxation_rate`); ``rho = lambda_eval / |lambda_train|`` (NaN where either
    slope is undefined or ``lambda_train = 0``)."""
    train_steps, train_values = np.asarray(train_steps, float), np.asarray(train_values, float)
    eval_steps, eval_values = np.asarray(eval_steps, float), np.asarray(eval_values, float)
    order = np.argsort(eval_steps, kind="stable")
    eval_steps, eval_values = eval_steps[order], eval_values[order]
    width = window_fraction * (float(np.ptp(eval_steps)) if eval_steps.size else 0.0)
    lam_train, lam_eval, rho = [], [], []
    for center in eval_steps:
        in_train = np.abs(train_steps - center) <= width / 2
        in_eval = np.abs(eval_steps - center) <= width / 2
        lt = local_relaxation_rate(train_steps[in_train], train_values[in_train], train_r_inf, min_points)
        le = local_relaxation_rate(eval_steps[in_eval], eval_values[in_eval], eval_r_inf, min_points)
        lam_train.append(lt)
        lam_eval.append(le)
        rho.append(le / abs(lt) if math.isfinite(lt) and math.isfinite(le) and lt != 0 else float("nan"))
    return CouplingRatio(eval_steps, np.array(rho), np.array(lam_train), np.array(lam_eval), width)


def gold_column(curves: RunCurves, cfg: RewardHackingConfig) -> tuple[str | None, str]:
    """The reward function that scores the task itself, as ``(column, how it was chosen)``: ``gold_reward`` when
    declared (its column ``rewards/<fn>/mean``, or the name as given), else a ``rewards/<fn>/mean`` with a word of
    its name (split at anything but letters and digits, lower case) that begins with one of ``gold_names`` and none
    that begins with one of ``not_gold_names`` (``correctness_reward_func``, ``accuracy``, ``check_answer``; not
    ``incorrect_penalty``, ``answer_format``, ``answer_recall_penalty``). ``gold_names`` are in order of preference:
    the functions matched by the first word that matches any are the candidates (``correctness`` before
    ``check_answer``). ``(None, why not)`` when the reward has fewer than two functions, none or several
    candidates match, or the declared one was not logged. Where no function is named so and ``gold_by_elimination``
    is opted into (measured on dev and not a default: docs/live-history.md, third round), a reward of two or more
    functions all but one of which ``not_gold_names`` rule out (a format term beside ``chess_reward_func``) takes
    the one left: the task's own score by elimination."""
    functions = components(curves)
    if cfg.gold_reward is not None:
        for column in (f"rewards/{cfg.gold_reward}/mean", cfg.gold_reward):
            if curves.has(column):
                return column, f"the declared gold reward {cfg.gold_reward!r}"
        return None, f"the declared gold reward {cfg.gold_reward!r} was not logged"
    if len(functions) < 2:
        return None, "no eval column and fewer than two reward functions logged"
    names = {c: REWARD_FUNCTION_MEAN.match(c)["fn"] for c in functions}
    tokens = {c: re.findall(r"[a-z0-9]+", name.lower()) for c, name in names.items()}
    excluded = [word.lower() for word in cfg.not_gold_names]
    eligible = {c: parts for c, parts in tokens.items()
                if not any(part.startswith(word) for part in parts for word in excluded)}
    matches: list[str] = []
    for word in (w.lower() for w in cfg.gold_names):
        matches = [c for c, parts in eligible.items() if any(part.startswith(word) for part in parts)]
        if matches:
            break
    if len(matches) == 1:
        return matches[0], "the reward function named as scoring the task"
    if not matches and cfg.gold_by_elimination and len(eligible) == 1:
        column = next(iter(eligible))
        return column, ("the one reward function not ruled out as a format term or a penalty (the others: "
                        f"{', '.join(n for c, n in names.items() if c != column)})")
    return None, (f"no reward function named as scoring the task (declare the one that does with --gold-reward "
                  f"FN, of: {', '.join(names.values())})" if not matches else
                  f"several reward functions could score the task ({', '.join(matches)}): declare gold_reward")


def held_out_column(curves: RunCurves, cfg: RewardHackingConfig) -> tuple[str | None, str]:
    """Figure 2's held-out curve: the first of ``eval_columns`` logged, else :func:`gold_column`."""
    column = next((c for c in cfg.eval_columns if curves.has(c)), None)
    if column is not None:
        return column, "eval"
    return gold_column(curves, cfg)


def gold_share(curves: RunCurves, gold_column: str, config: DiagnosticsConfig) -> dict[str, float] | None:
    """The share of the reward's rise its gold term carries, where the gold term is one of the functions the reward
    sums (TRL's ``reward`` is their weighted sum, so both rises are in the reward's units): the linear trends' rises
    over the run (:func:`pgrpo.diagnose.modes.no_learning.rise_test`), ``gold_rise / reward_rise``; None where the
    reward does not rise beyond its noise (nothing to share) or a curve is missing."""
    z = config.modes.no_learning.rise_over_noise
    reward, gold = curve(curves, "reward", config), curve(curves, gold_column, config)
    if reward is None or gold is None:
        return None
    total, part = rise_test(reward, z), rise_test(gold, z)
    if not (rise(total) and total["trend_rise"] > 0):
        return None
    return {"reward_rise": float(total["trend_rise"]), "reward_threshold": float(total["trend_threshold"]),
            "gold_rise": float(part["trend_rise"]), "share": float(part["trend_rise"] / total["trend_rise"])}


def _rise_problem(fit: Any, what: str, min_over_noise: float) -> str | None:
    """Why a fitted rise cannot be used (None when it can)."""
    if fit is None or not fit.success:
        return f"three-phase fit of the {what} failed: {getattr(fit, 'message', 'no fit')}"
    rise = fit.R_inf - fit.R0
    noise = fit_noise(fit)
    if not rise > 0:
        return f"the {what} fit does not rise (R_inf - R0 = {fmt(rise)})"
    if math.isfinite(noise) and rise < min_over_noise * noise:
        return (f"the {what} rise R_inf - R0 = {fmt(rise)} is within {min_over_noise:g} x its residual s.d. "
                f"{fmt(noise)}")
    return None


def reward_hacking(curves: RunCurves, config: DiagnosticsConfig | None = None,
                   fits: Mapping[str, Any] | None = None) -> DiagnosticResult:
    """Figure 2 for one run: doubly normalised parametric curve, deficit, rolling coupling ratio, verdict.

    ``fits``: precomputed three-phase fits by column (e.g. from the fitting stage); missing ones are fitted here.
    """
    config = config or DiagnosticsConfig()
    cfg = config.reward_hacking
    fits = dict(fits or {})

    def result(verdict: str, reason: str, **kw: Any) -> DiagnosticResult:
        return DiagnosticResult(REWARD_HACKING, curves.model, curves.G, verdict, reason, **kw)

    eval_column, chosen = held_out_column(curves, cfg)
    missing = [c for c in ("reward",) if not curves.has(c)]
    if eval_column is None:
        missing.append(" or ".join(cfg.eval_columns))
    if missing:
        why = "" if eval_column is not None else f" ({chosen})"
        return result(NOT_RUN, f"column {' and '.join(repr(m) for m in missing)} missing{why}", missing=missing)
    t_steps, t_values, _ = curves.series("reward")
    e_steps, e_values, _ = curves.series(eval_column)
    numbers: dict[str, Any] = {"eval_column": eval_column, "n_eval_points": int(e_steps.size),
                               "rho_min": cfg.rho_min, "deficit_max": cfg.deficit_max}
    if chosen != "eval":
        numbers["held_out"] = f"{eval_column}: {chosen}, standing in for an eval column"
    if t_steps.size < config.min_points:
        return result(INCONCLUSIVE, f"only {t_steps.size} train reward point(s); need {config.min_points}",
                      numbers=numbers)
    if e_steps.size < cfg.min_eval_points:
        return result(INCONCLUSIVE, f"only {e_steps.size} {eval_column} point(s); need {cfg.min_eval_points}",
                      numbers=numbers)
    if chosen != "eval":
        share = gold_share(curves, eval_column, config)
        if share is not None:
            numbers["gold_share"] = share
            if share["share"] < cfg.gold_share_min:
                numbers["decided_by"] = "gold_share"
                return result(HACKING, f"the reward rises by {fmt(share['reward_rise'])} over the run (its linear "
                                       f"trend, beyond {fmt(share['reward_threshold'])}, its noise) and "
                                       f"{eval_column} carries {share['share']:.0%} of it ({fmt(share['gold_rise'])}; "
                                       f"below {cfg.gold_share_min:.0%}): the other terms make the rise",
                              numbers=numbers)
    train_fit = fits.get("reward") or fit_three_phase_curve(t_steps, t_values)
    eval_fit = fits.get(eval_column) or fit_three_phase_curve(e_steps, e_values)
    numbers["train_fit"], numbers["eval_fit"] = fit_summary(train_fit), fit_summary(eval_fit)

    train_problem = _rise_problem(train_fit, "train reward", cfg.min_rise_over_noise)
    if train_problem:
        return result(INCONCLUSIVE, train_problem, numbers=numbers)
    if eval_fit is None or not eval_fit.success:
        status = getattr(eval_fit, "status", "")
        if status in ("flat", "decreasing"):
            return result(HACKING, f"the train reward rises (R0 {fmt(train_fit.R0)} -> R_inf {fmt(train_fit.R_inf)}) "
                                   f"but the {eval_column} does not ({getattr(eval_fit, 'message', '')})",
                          numbers=numbers)
        return result(INCONCLUSIVE, f"three-phase fit of {eval_column} failed: {getattr(eval_fit, 'message', '')}",
                      numbers=numbers)
    if not eval_fit.R_inf > eval_fit.R0:
        return result(HACKING, f"the train reward rises but the {eval_column} fit does not "
                               f"(R_inf - R0 = {fmt(eval_fit.R_inf - eval_fit.R0)})", numbers=numbers)
    eval_problem = _rise_problem(eval_fit, eval_column, cfg.min_rise_over_noise)

    smoothed = smooth(t_values, config.smoothing)
    u_train = normalized_progress(np.interp(e_steps, t_steps, smoothed), train_fit.R0, train_fit.R_inf)
    u_eval = normalized_progress(e_values, eval_fit.R0, eval_fit.R_inf)
    gap = u_train - u_eval
    deficit = float(np.nanmean(gap)) if np.isfinite(gap).any() else float("nan")
    coupling = rolling_coupling_ratio(t_steps, t_values, train_fit.R_inf, e_steps, e_values, eval_fit.R_inf,
                                      cfg.window_fraction, cfg.min_window_points)
    center_progress = curves.progress(coupling.centers)
    lo, hi = cfg.interior
    interior = (center_progress >= lo) & (center_progress <= hi) & np.isfinite(coupling.rho)
    rho_median = float(np.median(coupling.rho[interior])) if interior.any() else float("nan")
    numbers.update({
        "deficit": deficit, "max_gap": float(np.nanmax(gap)) if np.isfinite(gap).any() else float("nan"),
        "rho_interior_median": rho_median, "n_rho_interior": int(interior.sum()), "interior": list(cfg.interior),
        "window_steps": coupling.window_steps, "final_u_train": float(u_train[-1]), "final_u_eval": float(u_eval[-1]),
    })
    series = {
        "eval_steps": e_steps, "progress": curves.progress(e_steps), "u_train": u_train, "u_eval": u_eval,
        "rho_steps": coupling.centers, "rho_progress": center_progress, "rho": coupling.rho,
        "lambda_train": coupling.lambda_train, "lambda_eval": coupling.lambda_eval,
    }
    if eval_problem:
        return result(INCONCLUSIVE, f"{eval_problem}; deficit {fmt(deficit)}, median interior rho {fmt(rho_median)}",
                      numbers=numbers, series=series)

    rho_text = (f"median rho over {lo:.0%}-{hi:.0%} of training = {fmt(rho_median)} "
                f"({int(interior.sum())} windows of {fmt(coupling.window_steps)} steps; healthy >= {cfg.rho_min:g})")
    deficit_text = f"deficit = {fmt(deficit)} (healthy <= {cfg.deficit_max:g})"
    fit_text = f"{eval_column}; fit R^2 train {fmt(train_fit.r2, 2)}, eval {fmt(eval_fit.r2, 2)}"
    deficit_ok = deficit <= cfg.deficit_max
    if not math.isfinite(rho_median):
        why = "no interior window with enough train and eval points below R_inf"
        verdict = CO_SATURATING if deficit_ok else HACKING
        return result(verdict, f"{deficit_text}; rho unavailable ({why}), deficit alone; {fit_text}",
                      numbers=numbers, series=series)
    rho_ok = rho_median >= cfg.rho_min
    if rho_ok and deficit_ok:
        return result(CO_SATURATING, f"{rho_text}; {deficit_text}; {fit_text}", numbers=numbers, series=series)
    if not rho_ok and not deficit_ok:
        return result(HACKING, f"{rho_text}; {deficit_text}; {fit_text}", numbers=numbers, series=series)
    which = "rho healthy, deficit not" if rho_ok else "deficit healthy, rho not"
    return result(INCONCLUSIVE, f"read-outs disagree, {which}: {rho_text}; {deficit_text}; {fit_text}",
                  numbers=numbers, series=series)
