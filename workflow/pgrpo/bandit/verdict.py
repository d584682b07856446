"""Verdicts on the claims of Section 5.6: the Figure 6 cascade, the Prop. 9 frontier on the threshold line
``K eta K_ref = 1 - mu`` (Figure 7), the truncated zeta = 1 onset (Eq. 10) and bounded ringing; each graded
reproduced / partly / not with the numbers behind it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from pgrpo import theory
from pgrpo.bandit.settings import Reading

# The table and the verdict
RANK = {"monotone": 0, "overshoot": 1, "oscillatory": 2, "collapsed": 3}


#: thresholds of the verdicts (stated in verdict.md)
CASCADE_MAP_REPRODUCED = 0.8   # fraction of eta rows that show the cascade (see _is_cascade)


CASCADE_MAP_PARTLY = 0.5


FRONTIER_REPRODUCED = (0.8, 1.25)  # median first-non-monotone K_ref / (1 - mu)/(K eta), small-eta corner


FRONTIER_PARTLY = (0.5, 2.0)


SMALL_ETA_FRACTION = 1 / 3     # the corner: the smallest third of the eta rows whose threshold lies in the grid


RINGING_COLLAPSE_REPRODUCED = 0.01  # collapsed fraction beyond the threshold


RINGING_PERSISTENT_REPRODUCED = 0.5  # persistent-ringing fraction beyond the threshold


RINGING_COLLAPSE_PARTLY = 0.25


ONSET_REPRODUCED = 0.8         # fraction of rows where the zeta=1 onset lies below the empirical onset


ONSET_PARTLY = 0.5


@dataclass(frozen=True)
class RowFrontier:
    """Along one ``eta`` row: the first ``K_ref`` that leaves the monotone regime (after the first monotone cell).

    ``status``: ``ok``; ``never_monotone`` (no monotone cell, ``exit_k_ref`` NaN); ``censored`` (monotone up to the
    last ``K_ref`` of the grid, ``exit_k_ref`` NaN)."""

    exit_k_ref: float
    first_oscillatory_k_ref: float
    status: str
    cascade: bool


def _is_cascade(labels: Sequence[str]) -> bool:
    """Along increasing K_ref: starts monotone, never steps back (monotone < overshoot < oscillatory < collapsed),
    and shows all of monotone, overshoot and oscillatory (a collapse may follow; the ringing claim judges it)."""
    ranks = np.array([RANK[x] for x in labels])
    return bool(len(ranks) and ranks[0] == 0 and np.all(np.diff(ranks) >= 0) and {0, 1, 2} <= set(ranks.tolist()))


def row_frontier(k_refs: np.ndarray, labels: Sequence[str]) -> RowFrontier:
    order = np.argsort(k_refs)
    k = np.asarray(k_refs)[order]
    lab = np.asarray(labels, dtype=object)[order]
    osc = np.nonzero(lab == "oscillatory")[0]
    first_osc = float(k[osc[0]]) if osc.size else float("nan")
    cascade = _is_cascade(lab)
    mono = np.nonzero(lab == "monotone")[0]
    if mono.size == 0:
        return RowFrontier(float("nan"), first_osc, "never_monotone", cascade)
    after = np.nonzero(lab[mono[0]:] != "monotone")[0]
    if after.size == 0:
        return RowFrontier(float("nan"), first_osc, "censored", cascade)
    return RowFrontier(float(k[mono[0] + after[0]]), first_osc, "ok", cascade)


@dataclass(frozen=True)
class ClaimVerdict:
    """A claim of Section 5.6 (``key``: cascade, frontier, ringing, onset), graded for one reading."""

    key: str
    claim: str
    reading: str
    verdict: str
    numbers: str


def frontier_table(maps: Mapping[Reading, pd.DataFrame], stiffness: float, mu: float) -> pd.DataFrame:
    """Per ``eta``: Prop. 9 threshold, ``zeta = 1`` onset, and per reading the first non-monotone ``K_ref``."""
    etas = np.unique(next(iter(maps.values()))["eta"].to_numpy())
    table = pd.DataFrame({"eta": etas, "threshold_k_ref": theory.critical_refresh_interval(etas, mu, stiffness),
                          "zeta1_k_ref": theory.critical_damping_refresh_interval(etas, mu, stiffness)})
    for reading, frame in maps.items():
        exits, oscs, statuses, cascades = [], [], [], []
        for eta in etas:
            row = frame[np.isclose(frame["eta"], eta)]
            f = row_frontier(row["k_ref"].to_numpy(), row["label"].to_list())
            exits.append(f.exit_k_ref)
            oscs.append(f.first_oscillatory_k_ref)
            statuses.append(f.status)
            cascades.append(f.cascade)
        key = f"{reading.refresh}_{reading.gradient}"
        table[f"exit_k_ref[{key}]"] = exits
        table[f"ratio[{key}]"] = np.array(exits) / table["threshold_k_ref"].to_numpy()
        table[f"first_oscillatory_k_ref[{key}]"] = oscs
        table[f"status[{key}]"] = statuses
        table[f"cascade[{key}]"] = cascades
    return table


def _grade(value: float, reproduced: tuple[float, float], partly: tuple[float, float]) -> str:
    if not np.isfinite(value):
        return "not"
    if reproduced[0] <= value <= reproduced[1]:
        return "reproduced"
    if partly[0] <= value <= partly[1]:
        return "partly"
    return "not"


def judge(reading: Reading, frame: pd.DataFrame, sweep: pd.DataFrame, table: pd.DataFrame, stiffness: float,
          mu: float) -> list[ClaimVerdict]:
    """The four claims of Section 5.6 for one reading, graded with the module's thresholds."""
    key = f"{reading.refresh}_{reading.gradient}"
    k_max = float(frame["k_ref"].max())
    verdicts = []

    # 1. cascade: the Figure 6 sweep and the rows of the map
    sw = sweep[(sweep.refresh == reading.refresh) & (sweep.gradient == reading.gradient)].sort_values("k_ref")
    labels = sw["label"].to_list()
    ranks = np.array([RANK[x] for x in labels])
    sweep_ordered = bool(np.all(np.diff(ranks) >= 0))
    sweep_all = {"monotone", "overshoot", "oscillatory"} <= set(labels)
    sweep_ok = _is_cascade(labels)
    map_fraction = float(np.mean(table[f"cascade[{key}]"].astype(bool)))
    if sweep_ok and map_fraction >= CASCADE_MAP_REPRODUCED:
        grade = "reproduced"
    elif sweep_ok or map_fraction >= CASCADE_MAP_PARTLY:
        grade = "partly"
    else:
        grade = "not"
    runs = label_runs(sw["k_ref"].to_numpy(), labels)
    verdicts.append(ClaimVerdict(
        "cascade", "monotone -> overshoot -> oscillation cascade", reading.name, grade,
        f"Fig. 6 sweep (K_ref 1..{int(sw.k_ref.max())}): {runs}; ordered={sweep_ordered}, all three={sweep_all}; "
        f"map rows showing the cascade: {map_fraction:.0%}"))

    # 2. frontier on the threshold line at small eta
    inside = table[table["threshold_k_ref"] <= k_max].sort_values("eta")
    n_corner = max(1, int(math.ceil(SMALL_ETA_FRACTION * len(inside)))) if len(inside) else 0
    corner = inside.iloc[:n_corner]
    ratios = corner[f"ratio[{key}]"].to_numpy(dtype=float)
    censored = corner[f"status[{key}]"].to_numpy() == "censored"
    ratios = np.where(censored, k_max / corner["threshold_k_ref"].to_numpy(), ratios)  # lower bounds
    defined = np.isfinite(ratios)
    median = float(np.median(ratios[defined])) if defined.any() else float("nan")
    all_rows = table[f"ratio[{key}]"].to_numpy(dtype=float)
    ok_rows = np.isfinite(all_rows)
    slope = (float(np.polyfit(np.log(table["eta"][ok_rows]), np.log(table[f"exit_k_ref[{key}]"][ok_rows]), 1)[0])
             if ok_rows.sum() >= 3 else float("nan"))
    grade = _grade(median, FRONTIER_REPRODUCED, FRONTIER_PARTLY)
    beyond_line = frame["K_eta_K_ref"] > 1 - mu
    monotone_beyond = float(np.mean(frame.loc[beyond_line, "label"] == "monotone")) if beyond_line.any() else 0.0
    eta_range = (f"eta {corner['eta'].min():.3g}-{corner['eta'].max():.3g}" if len(corner) else "no eta row has "
                 "its threshold inside the grid")
    verdicts.append(ClaimVerdict(
        "frontier", "frontier on the threshold line K eta K_ref = 1 - mu at small eta", reading.name, grade,
        f"median first-non-monotone K_ref / threshold = {median:.2f} over {int(defined.sum())} rows ({eta_range}; "
        f"{int(censored.sum())} censored at K_ref={int(k_max)}, "
        f"{int((corner[f'status[{key}]'] == 'never_monotone').sum())} never monotone); "
        f"log-log slope of the frontier vs eta over all rows: {slope:.2f} (hyperbola: -1); "
        f"cells beyond the line that stay monotone: {monotone_beyond:.0%}"))

    # 3. bounded ringing, never divergence
    beyond = frame[frame["K_eta_K_ref"] > 1 - mu]
    if len(beyond):
        collapsed = float(np.mean(beyond["label"] == "collapsed"))
        ringing = float(np.mean((beyond["label"] == "oscillatory") & (~beyond["settled"].astype(bool))))
        settled = float(np.mean(beyond["settled"].astype(bool) & (beyond["label"] != "collapsed")))
        bounded = beyond[beyond["label"] != "collapsed"]
        spread = float(bounded["theta_spread"].max()) if len(bounded) else float("nan")
        if collapsed <= RINGING_COLLAPSE_REPRODUCED and ringing >= RINGING_PERSISTENT_REPRODUCED:
            grade = "reproduced"
        elif collapsed <= RINGING_COLLAPSE_PARTLY:
            grade = "partly"
        else:
            grade = "not"
        numbers = (f"{len(beyond)} cells beyond the line: collapsed (theta diverges, p -> max r) {collapsed:.0%}, "
                   f"still ringing at the end {ringing:.0%}, settled at p* {settled:.0%}; "
                   f"max theta spread of the non-collapsed cells {spread:.1f}")
    else:
        grade, numbers = "not", "no cell of the grid lies beyond the threshold line (untestable)"
    verdicts.append(ClaimVerdict("ringing", "bounded ringing, never divergence, beyond the threshold", reading.name,
                                 grade, numbers))

    # 4. the zeta = 1 onset lies below the empirical onset
    ok = table[f"status[{key}]"].isin(["ok", "censored"])
    rows = table[ok]
    if len(rows):
        exits = rows[f"exit_k_ref[{key}]"].to_numpy(dtype=float)
        exits = np.where(rows[f"status[{key}]"] == "censored", np.inf, exits)
        zeta1 = rows["zeta1_k_ref"].to_numpy()
        below = zeta1 < exits
        fraction = float(np.mean(below))
        grade = ("reproduced" if fraction >= ONSET_REPRODUCED else "partly" if fraction >= ONSET_PARTLY else "not")
        finite = (zeta1 > 0) & np.isfinite(exits)
        gap = f"{float(np.median(exits[finite] / zeta1[finite])):.2f}" if finite.any() else "n/a"
        numbers = (f"zeta=1 onset below the empirical onset in {int(below.sum())}/{len(rows)} eta rows "
                   f"({fraction:.0%}; in {int((zeta1 == 0).sum())} of them Eq. 10 has zeta < 1 at every K_ref); "
                   f"median empirical / zeta=1 onset where both are finite: {gap}; {int((~ok).sum())} rows never "
                   f"monotone (empirical onset <= K_ref={int(frame['k_ref'].min())}) left out")
    else:
        grade, numbers = "not", "no eta row has a monotone cell (untestable)"
    verdicts.append(ClaimVerdict("onset", "zeta = 1 onset (Eq. 10) below the empirical onset", reading.name,
                                 grade, numbers))
    return verdicts


def label_runs(k_refs: np.ndarray, labels: Sequence[str]) -> str:
    """``monotone 1-3, overshoot 4-6, ...``: the labels along K_ref as contiguous runs."""
    parts = []
    start = 0
    for i in range(1, len(labels) + 1):
        if i == len(labels) or labels[i] != labels[start]:
            a, b = int(k_refs[start]), int(k_refs[i - 1])
            parts.append(f"{labels[start]} {a}" + (f"-{b}" if b != a else ""))
            start = i
    return ", ".join(parts)


def view_table(table: pd.DataFrame, readings: Sequence[Reading]) -> pd.DataFrame:
    """The human-facing columns: eta, threshold, zeta=1, and per reading the exit K_ref and its ratio."""
    view = table[["eta", "threshold_k_ref", "zeta1_k_ref"]].copy()
    view.columns = ["eta", "(1-mu)/(K eta)", "zeta=1 K_ref"]
    for reading in readings:
        key = f"{reading.refresh}_{reading.gradient}"
        exits = table[f"exit_k_ref[{key}]"].astype(float)
        status = table[f"status[{key}]"]
        shown = [(f"{e:.0f}" if s == "ok" else "never mono." if s == "never_monotone" else "> max")
                 for e, s in zip(exits, status)]
        view[f"exit {reading.refresh[:4]}/{'IW' if reading.gradient == 'importance_weighted' else 'stale'}"] = shown
        view[f"ratio {reading.refresh[:4]}/{'IW' if reading.gradient == 'importance_weighted' else 'stale'}"] = \
            table[f"ratio[{key}]"]
    return view
