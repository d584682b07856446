"""Read-outs the failure modes share: a logged curve with its noise, levels and smoothing (:class:`Curve`), where a
failure began (:func:`persistent_onset`, :func:`departure_onset`), spikes, crashes, and where the reward sits in its
range (:func:`reward_position`).

Noise. Each logged value is one batch's mean, so its scatter around the trend is the batch noise. It is estimated
from first differences, which a slow trend barely moves: ``sd = 1.4826 x MAD(diff) / sqrt(2)`` (the median absolute
deviation is robust to the jumps of a spike or a collapse; the plain s.d. of the differences / sqrt(2) when the MAD
is 0, as for a piecewise-constant curve). A window mean of ``m`` points has standard error ``sd / sqrt(m)``;
consecutive batches are independent draws, so no autocorrelation correction is made. A maximum over ``k``
independent windows is biased upward by about ``sqrt(2 ln k)`` standard errors (the expected maximum of ``k``
normal draws), which :func:`max_bias` adds where a peak is read.

Levels. Early/late levels are means over the first/last ``early_fraction``/``late_fraction`` of the step range (the
same windows as Figures 2-5); the moving average is centred, over ``smoothing_fraction`` of the logged points (at
least 3), so logs that log every k steps are treated alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pandas as pd

from pgrpo.diagnose.numerics import window_mask
from pgrpo.diagnose.records import RunCurves
from pgrpo.diagnose.settings import DiagnosticsConfig
from pgrpo.fit.intervals import robust_noise_sd
from pgrpo.grpo.run_log import REWARD_FUNCTION_MEAN

def noise_sd(values: Sequence[float]) -> float:
    """Per-point noise s.d. from first differences (module docstring; :func:`pgrpo.fit.intervals.robust_noise_sd`
    with the sample s.d. as its fallback); NaN with fewer than 3 values."""
    return robust_noise_sd(values, ddof=1)


def max_bias(k: float) -> float:
    """Expected maximum of ``k`` independent standard normal draws, ``sqrt(2 ln k)`` (0 for ``k <= 1``)."""
    return math.sqrt(2 * math.log(k)) if k > 1 else 0.0


def smoothing_window(n: int, fraction: float) -> int:
    return int(min(max(3, round(fraction * n)), max(n, 1)))


def smooth(values: np.ndarray, window: int) -> np.ndarray:
    if window <= 1 or values.size == 0:
        return np.asarray(values, float)
    return pd.Series(values).rolling(window, center=True, min_periods=1).mean().to_numpy()


@dataclass
class Curve:
    """One logged quantity of a run: finite values in step order, their moving average, noise and levels."""

    column: str
    steps: np.ndarray
    values: np.ndarray
    smooth: np.ndarray
    window: int
    sd: float
    early: float
    late: float
    n_early: int
    n_late: int

    @property
    def n(self) -> int:
        return int(self.steps.size)

    @property
    def se_early_late(self) -> float:
        """Standard error of ``late - early``."""
        return self.sd * math.sqrt(1 / max(self.n_early, 1) + 1 / max(self.n_late, 1))

    @property
    def se_window(self) -> float:
        """Standard error of one moving-average value."""
        return self.sd / math.sqrt(self.window)

    def late_mask(self, fraction: float) -> np.ndarray:
        return window_mask(self.steps, fraction, late=True)

    def early_mask(self, fraction: float) -> np.ndarray:
        return window_mask(self.steps, fraction, late=False)


def missing_reason(curves: RunCurves, column: str, config: DiagnosticsConfig) -> tuple[str, list[str]]:
    """Why :func:`curve` gave no curve for ``column``, and the columns that are missing (for ``not_run``)."""
    n = curves.series(column)[0].size
    if n == 0:
        return f"column '{column}' missing", [column]
    return f"only {n} {column} point(s); need {config.modes.min_points}", []


def curve(curves: RunCurves, column: str, config: DiagnosticsConfig, minimum: int | None = None) -> Curve | None:
    """The :class:`Curve` of ``column``, or None with fewer than ``minimum`` (``modes.min_points``) finite values."""
    if not curves.has(column):
        return None
    steps, values, _ = curves.series(column)
    if steps.size < (minimum or config.modes.min_points):
        return None
    window = smoothing_window(steps.size, config.modes.smoothing_fraction)
    early_mask = window_mask(steps, config.early_fraction, late=False)
    late_mask = window_mask(steps, config.late_fraction, late=True)
    return Curve(column, steps, values, smooth(values, window), window, noise_sd(values),
                 float(np.mean(values[early_mask])), float(np.mean(values[late_mask])), int(early_mask.sum()),
                 int(late_mask.sum()))


def components(curves: RunCurves) -> list[str]:
    """The reward functions' mean columns the log has (``rewards/<fn>/mean``), in log order."""
    return [c for c in curves.frame.columns if REWARD_FUNCTION_MEAN.match(str(c)) and curves.has(c)]


def silent_functions(curves: RunCurves, min_points: int) -> list[dict[str, Any]]:
    """The reward functions that scored every completion alike at every logged step: a mean exactly constant over
    at least ``min_points`` logged steps, and a logged s.d. (``rewards/<fn>/std``) of 0 wherever TRL logs one. Such a
    function adds one number to every completion of a group, so it cancels in the group's advantage (Eq. 1,
    ``r - mean(r)``) and gives GRPO no signal: a pattern that never matches, a judge that always answers alike. Each
    as ``{function, value, points, first_step, last_step}``, in log order."""
    out = []
    for column in components(curves):
        steps, values, _ = curves.series(column)
        if values.size < min_points or float(np.ptp(values)) > 1e-12 * max(1.0, float(np.max(np.abs(values)))):
            continue
        spread = column[: -len("mean")] + "std"
        if curves.has(spread) and float(np.nanmax(np.abs(curves.series(spread)[1]))) > 1e-12:
            continue
        out.append({"function": REWARD_FUNCTION_MEAN.match(column)["fn"], "value": float(values[0]),
                    "points": int(values.size), "first_step": float(steps[0]), "last_step": float(steps[-1])})
    return out


def persistent_onset(steps: np.ndarray, hits: np.ndarray, min_fraction: float) -> float | None:
    """The first step that shows the failure and from which at least ``min_fraction`` of the later logged points
    show it too (a transient that recovers does not count); None if there is none."""
    hits = np.asarray(hits, bool)
    if not hits.any():
        return None
    tail_share = np.cumsum(hits[::-1])[::-1] / np.arange(hits.size, 0, -1)
    ok = np.flatnonzero(hits & (tail_share >= min_fraction))
    return float(steps[ok[0]]) if ok.size else None


def departure_onset(steps: np.ndarray, smoothed: np.ndarray, baseline: float, band: float, direction: int,
                    index: int) -> float:
    """Where a departure began: from ``index`` (where the curve crossed a failure threshold) back to the first
    point of the unbroken run of points beyond ``baseline + direction x band``."""
    j = int(index)
    while j > 0 and direction * (smoothed[j - 1] - baseline) > band:
        j -= 1
    return float(steps[j])


def change_onset(c: Curve, baseline: float, direction: int, index: int, z: float, persistence: float) -> float:
    """Where a change that crossed a failure threshold at ``index`` began. The moving average finds the unbroken run
    of points beyond ``baseline`` by ``z`` standard errors of one moving-average value (:func:`departure_onset`);
    a centred average leaves the baseline up to half a window early, so the raw points then place it: the first
    point from that run on that is beyond the baseline by 2 per-point s.d. and from which ``persistence`` of the
    points up to ``index`` are too (the smoothed onset if there is none). The s.d. is the noise of the points
    before ``index`` (noise often scales with the level, e.g. entropy)."""
    sd = noise_sd(c.values[:index]) if index >= 5 else c.sd  # the noise before the change (it may scale with it)
    sd = sd if math.isfinite(sd) else c.sd
    start = departure_onset(c.steps, c.smooth, baseline, z * sd / math.sqrt(c.window), direction, index)
    j0 = int(np.searchsorted(c.steps, start))
    raw = direction * (c.values - baseline) > 2 * sd if math.isfinite(sd) and sd > 0 else \
        direction * (c.values - baseline) > 0
    for j in range(j0, int(index) + 1):
        if raw[j] and raw[j:int(index) + 1].mean() >= persistence:
            return float(c.steps[j])
    return start


def spikes(steps: np.ndarray, values: np.ndarray, factor: float, window: int, min_excess: float = 0.0,
           reference: np.ndarray | None = None) -> np.ndarray:
    """Indices whose value exceeds ``factor`` x the median of the previous ``window`` reference values (positive ones
    at earlier points where ``reference`` is True; at least 2) and that median by at least ``min_excess``. Zeros (a
    logged grad_norm of 0) never set the reference level; ``reference`` leaves out the steps whose groups all had
    zero spread, where the policy-gradient term is 0 and grad_norm is the KL term's alone, and where the KL is that of
    prompts already solved."""
    values = np.asarray(values, float)
    usable = np.isfinite(values) & (values > 0)
    if reference is not None:
        usable &= np.asarray(reference, bool)
    if window < 2:
        return np.asarray([], int)
    # a point with c usable values before it takes the median of the last min(c, window) of them (c >= 2): the
    # rolling median of the usable values, one place later
    medians = pd.Series(values[usable]).rolling(window, min_periods=2).median().to_numpy()
    before = np.searchsorted(np.flatnonzero(usable), np.arange(values.size))
    level = np.concatenate([[np.nan], medians])[before]
    with np.errstate(invalid="ignore"):
        hit = (values > factor * level) & (values - level >= min_excess)
    return np.flatnonzero(hit).astype(int)


def climbs(values: np.ndarray, factor: float, lag: int, count: int, min_excess: float = 0.0,
           reference: np.ndarray | None = None) -> list[tuple[int, float]]:
    """Each run of ``count`` or more consecutive logged points whose value is at least ``factor`` x the median of the
    positive (``reference``) values ``lag`` to ``3 x lag`` points before it (at least ``lag`` such points: a lagged
    baseline, so that a climb over ``lag`` points is not absorbed into its own reference, as it is into
    :func:`spikes`' rolling one) and that median by at least ``min_excess``: a level that climbs and stays up, not
    one value. As (index of the run's first point, its baseline median)."""
    values = np.asarray(values, float)
    usable = np.isfinite(values) & (values > 0)
    if reference is not None:
        usable &= np.asarray(reference, bool)
    # the median of the usable values among the 2 x lag points ending at j (at least lag of them), read at
    # j = i - lag - 1: the points i - 3 lag .. i - lag - 1
    rolled = pd.Series(np.where(usable, values, np.nan)).rolling(2 * lag, min_periods=max(lag, 1)).median()
    level = np.full(values.size, np.nan)
    if values.size > 2 * lag:
        level[2 * lag:] = rolled.to_numpy()[lag - 1:values.size - lag - 1]
    with np.errstate(invalid="ignore"):
        hit = (values >= factor * level) & (values - level >= min_excess)
    padded = np.concatenate([[0], hit.astype(int), [0]])
    starts, ends = np.flatnonzero(np.diff(padded) == 1), np.flatnonzero(np.diff(padded) == -1)
    return [(int(i), float(level[i])) for i, j in zip(starts, ends) if j - i >= count]


def bursts(indices: np.ndarray, count: int, span: int) -> int | None:
    """The first index of ``count`` or more spikes within ``span`` consecutive logged points (a recurring burst, not
    isolated spikes); None if there is none."""
    indices = np.asarray(indices, int)
    for j in range(indices.size - count + 1):
        if indices[j + count - 1] - indices[j] < span:
            return int(indices[j])
    return None


def crash_after(reward: Curve | None, step: float, z: float, after_step: float | None = None) -> tuple[bool, float]:
    """Whether the reward crashed at ``step``: the mean of the ``window`` logged rewards from ``after_step`` (default
    ``step``) on below the mean of the ``window`` before ``step`` by more than ``z`` standard errors. Returns
    (crashed, drop)."""
    if reward is None or not math.isfinite(reward.sd):
        return False, float("nan")
    k = reward.window
    before = reward.values[reward.steps < step][-k:]
    after = reward.values[reward.steps >= (step if after_step is None else after_step)][:k]
    if before.size < 2 or after.size < 2:
        return False, float("nan")
    drop = float(before.mean() - after.mean())
    se = reward.sd * math.sqrt(1 / before.size + 1 / after.size)
    return drop > z * se and drop > 0, drop


def recovery_step(reward: Curve | None, step: float, z: float) -> float | None:
    """After a crash at ``step``: the first later step at which the reward's moving average is back within ``z``
    standard errors of one moving-average value of the mean of the ``window`` rewards before ``step`` (None if it
    never is: the crash lasts)."""
    if reward is None or not math.isfinite(reward.sd):
        return None
    before = reward.values[reward.steps < step][-reward.window:]
    if before.size < 2:
        return None
    back = np.flatnonzero((reward.steps > step) & (reward.smooth >= before.mean() - z * reward.se_window))
    return float(reward.steps[back[0]]) if back.size else None


@dataclass
class Position:
    """Where the smoothed reward sits in its range at each step: 0 at the bottom, 1 at the top."""

    steps: np.ndarray
    position: np.ndarray
    lo: float
    hi: float
    source: str
    moved: bool
    limiting: str


def reward_position(curves: RunCurves, reward: Curve, config: DiagnosticsConfig) -> Position:
    """The reward's position in ``[lo, hi]``: ``diagnostics.modes.reward_range`` if given, else the run's own range
    (min and max of the moving average). With several reward functions the position is the lowest over the total and
    each function that moved (a task term at its floor is not a solved task even if a format term is at its top).
    ``moved``: the total reward's range exceeds the noise (``rise_over_noise`` standard errors of the difference of two
    moving-average values); a reward that never moved sits at position 0."""
    z = config.modes.no_learning.rise_over_noise
    given = config.modes.reward_range
    if given is not None:
        lo, hi = given
        position = (reward.smooth - lo) / (hi - lo)
        return Position(reward.steps, np.clip(position, 0, 1), lo, hi, "diagnostics.modes.reward_range", True,
                        reward.column)
    lo, hi = float(np.min(reward.smooth)), float(np.max(reward.smooth))
    moved = hi - lo > z * reward.se_window * math.sqrt(2) if math.isfinite(reward.sd) else hi > lo
    position = (reward.smooth - lo) / (hi - lo) if hi > lo else np.zeros(reward.n)
    limiting = np.full(reward.n, reward.column, dtype=object)
    for column in components(curves):
        part = curve(curves, column, config)
        if part is None or part.n < 3:
            continue
        p_lo, p_hi = float(np.min(part.smooth)), float(np.max(part.smooth))
        if not p_hi - p_lo > z * part.se_window * math.sqrt(2):
            continue
        p_pos = np.interp(reward.steps, part.steps, (part.smooth - p_lo) / (p_hi - p_lo))
        lower = p_pos < position
        limiting[lower] = column
        position = np.minimum(position, p_pos)
    late = window_mask(reward.steps, config.late_fraction, late=True)
    names, counts = np.unique(limiting[late], return_counts=True)
    return Position(reward.steps, position, lo, hi, "the run's own range", bool(moved), str(names[np.argmax(counts)]))


def episodes_from_mask(steps: np.ndarray, hits: np.ndarray, margin: np.ndarray | None = None,
                       min_points: int = 1, max_gap: int = 0, values: np.ndarray | None = None) -> list[dict]:
    """The episodes of a failure from a per-step mask: runs of True, with gaps of at most ``max_gap`` logged points
    bridged and runs with fewer than ``min_points`` hits dropped. Each episode: ``start``/``end`` (its first and last
    hit step; ``end`` None when it reaches the last logged step: it lasts), ``peak`` (the step where ``margin``, the
    evidence over its threshold, is largest), ``peak_value`` (``values`` there, default the margin) and ``severity``
    (:func:`~pgrpo.diagnose.modes.record.severity_of` of that margin; ``low`` without one)."""
    from pgrpo.diagnose.modes.record import episode

    steps = np.asarray(steps, float)
    hits = np.asarray(hits, bool)
    idx = np.flatnonzero(hits)
    if idx.size == 0:
        return []
    runs, first, last = [], int(idx[0]), int(idx[0])
    for i in idx[1:]:
        if i - last - 1 <= max_gap:
            last = int(i)
        else:
            runs.append((first, last))
            first = last = int(i)
    runs.append((first, last))
    shown = values if values is not None else margin
    out = []
    for a, b in runs:
        if int(hits[a:b + 1].sum()) < min_points:
            continue
        part = None if margin is None else np.asarray(margin, float)[a:b + 1]
        if part is not None and np.isfinite(part).any():
            j = int(np.nanargmax(part))
            peak, top = float(steps[a + j]), float(part[j])
            value = float(np.asarray(shown, float)[a + j])
        else:
            peak, top, value = float(steps[a]), 1.0, None
        out.append(episode(steps[a], None if b == steps.size - 1 else steps[b], top, peak, value))
    return out


def long_episodes(episodes: list[dict], steps: np.ndarray, min_fraction: float) -> list[dict]:
    """The episodes that span at least ``min_fraction`` of the run's logged points (a resolved phase long enough
    to matter, not a transient)."""
    steps = np.asarray(steps, float)
    n = max(steps.size, 1)
    out = []
    for e in episodes:
        end = steps[-1] if e["end"] is None else e["end"]
        points = int(np.sum((steps >= e["start"]) & (steps <= end)))
        if points / n >= min_fraction:
            out.append(e)
    return out


def start_at(episodes: list[dict], onset: float | None) -> list[dict]:
    """The episodes with the one that holds ``onset`` (or the first after it) starting at ``onset``: a change
    point read back from a threshold crossing (:func:`change_onset`) places an episode's start better than the
    crossing itself."""
    if onset is None or not episodes:
        return episodes
    out = [dict(e) for e in episodes]
    for e in out:
        end = math.inf if e["end"] is None else e["end"]
        if onset <= end:
            if onset < e["start"]:
                e["start"] = float(onset)
            break
    previous = [e for e in out if e["end"] is not None and e["end"] < onset]
    return previous + [e for e in out if e not in previous]
