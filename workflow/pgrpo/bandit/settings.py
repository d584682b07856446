"""The ``bandit:`` config section (Section 5.6): defaults, validation with one-line errors naming the key, and the
settings records the bandit experiments read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from pgrpo import bandit
from pgrpo.errors import InputError

# Configuration
#: Binary verifiable rewards, two of eight completions correct, scaled so that the fixed point is p* = 1.35.
#: The dynamics see the rewards only through the standardised advantage, so r -> a r + b (a > 0) changes nothing
#: but the reward axis; the shape (2 of 8 correct) and beta = 1 give K = 0.123 over the default window.
DEFAULT_REWARDS: tuple[float, ...] = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.666, 1.666)


DEFAULTS: dict[str, Any] = {
    "rewards": list(DEFAULT_REWARDS),
    "beta": 1.0,
    "calibration": {
        "eta": 0.05,
        "steps": 20000,
        "window": [0.0, 0.5],
        "refresh": "sliding",
        "gradient": "importance_weighted",
        "report_windows": [[0.0, 0.1], [0.0, 0.25], [0.0, 0.5], [0.0, 0.75], [0.0, 0.9], [0.25, 0.75],
                           [0.5, 0.9], [0.9, 0.99]],
    },
    "classification": {"tolerance": 0.01, "collapse_tolerance": 0.05, "settle_fraction": 0.1},
    "sweep": {"eta": 0.30, "mu": 0.80, "k_refs": [1, 2, 4, 6, 8, 12, 16], "steps": 300, "settle_steps": 4000,
              "dense_k_ref_max": 40},
    "regime_map": {"etas": {"min": 0.03, "max": 0.6, "n": 40}, "k_refs": {"min": 1, "max": 80, "n": 40},
                   "mu": 0.80, "steps": 4000},
    "readings": [{"refresh": "sliding", "gradient": "importance_weighted"},
                 {"refresh": "sliding", "gradient": "stale"},
                 {"refresh": "periodic", "gradient": "importance_weighted"},
                 {"refresh": "periodic", "gradient": "stale"}],
    # the paper does not state its rewards: the same verdicts for other reward shapes, on a coarser grid
    "sensitivity": {"rewards": [[0, 0, 0, 0, 0, 0, 0, 1], [0, 0, 0, 0, 0, 0, 1, 2], [0, 1, 4, 9, 16, 25, 36, 49]],
                    "etas_n": 20, "k_refs_n": 20, "steps": 3000},
    # beyond the paper: real groups of G samples (Prop. 10's 1/G law), pgrpo.bandit.finite_g_study.GridSettings
    "finite_g": {"eta": 0.2, "mu": 0.0, "k_ref": 1, "refresh": "sliding", "gradient": "importance_weighted",
                 "group_sizes": [2, 4, 8, 16, 32, 64, 256, 1024], "replicas": 2000, "steps": 4000, "burn_in": 2000,
                 "seed": 0, "ddof": 1},
}


@dataclass(frozen=True)
class Reading:
    """One reading of the map (3): the refresh rule and the reward gradient (see :mod:`pgrpo.bandit`)."""

    refresh: str
    gradient: str

    @property
    def name(self) -> str:
        return f"{self.refresh}/{self.gradient}"


@dataclass(frozen=True)
class CalibrationSettings:
    eta: float
    steps: int
    window: tuple[float, float]
    refresh: str
    gradient: str
    report_windows: tuple[tuple[float, float], ...]


@dataclass(frozen=True)
class ClassificationSettings:
    tolerance: float
    collapse_tolerance: float
    settle_fraction: float


@dataclass(frozen=True)
class SweepSettings:
    eta: float
    mu: float
    k_refs: tuple[int, ...]
    steps: int
    settle_steps: int
    dense_k_ref_max: int


@dataclass(frozen=True)
class RegimeMapSettings:
    etas: np.ndarray
    k_refs: np.ndarray
    mu: float
    steps: int


@dataclass(frozen=True)
class SensitivitySettings:
    rewards: tuple[tuple[float, ...], ...]
    etas_n: int
    k_refs_n: int
    steps: int


@dataclass(frozen=True)
class BanditSettings:
    rewards: np.ndarray
    beta: float
    calibration: CalibrationSettings
    classification: ClassificationSettings
    sweep: SweepSettings
    regime_map: RegimeMapSettings
    readings: tuple[Reading, ...]
    sensitivity: SensitivitySettings


def merged(defaults: Mapping, given: Mapping | None, path: str) -> dict:
    if given is None:
        given = {}
    if not isinstance(given, Mapping):
        raise InputError(f"config key '{path}' must be a mapping, got {given!r}")
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise InputError(f"config key '{path}.{unknown[0]}' is not a known key (allowed here: "
                         f"{', '.join(sorted(defaults))})")
    out = dict(defaults)
    out.update(given)
    return out


def _number(value: Any, key: str, *, low: float | None = None, high: float | None = None,
            low_open: bool = False, high_open: bool = False, integer: bool = False) -> float | int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InputError(f"config key '{key}' must be a finite number, got {value!r}")
    if integer:
        if float(value) != int(value):
            raise InputError(f"config key '{key}' must be an integer, got {value!r}")
        value = int(value)
    if low is not None and (value <= low if low_open else value < low):
        raise InputError(f"config key '{key}' must be {'>' if low_open else '>='} {low}, got {value!r}")
    if high is not None and (value >= high if high_open else value > high):
        raise InputError(f"config key '{key}' must be {'<' if high_open else '<='} {high}, got {value!r}")
    return value


def _window(value: Any, key: str) -> tuple[float, float]:
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise InputError(f"config key '{key}' must be a pair [from, to] of completed fractions, got {value!r}")
    lo = _number(value[0], key, low=0.0, high=1.0, high_open=True)
    hi = _number(value[1], key, low=0.0, high=1.0, low_open=True, high_open=True)
    if not lo < hi:
        raise InputError(f"config key '{key}' must satisfy 0 <= from < to < 1, got {value!r}")
    return float(lo), float(hi)


def choice(value: Any, key: str, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise InputError(f"config key '{key}' must be one of {list(allowed)}, got {value!r}")
    return str(value)


def bandit_settings(bandit_cfg: Mapping | None) -> BanditSettings:
    """Validate the ``bandit:`` config section (defaults filled in); raise :class:`InputError` naming the key."""
    cfg = merged(DEFAULTS, bandit_cfg, "bandit")
    rewards = _rewards(cfg["rewards"], "bandit.rewards")
    beta = float(_number(cfg["beta"], "bandit.beta", low=0.0, low_open=True))

    c = merged(DEFAULTS["calibration"], cfg["calibration"], "bandit.calibration")
    windows = c["report_windows"]
    if not isinstance(windows, (list, tuple)) or not windows:
        raise InputError("config key 'bandit.calibration.report_windows' must be a non-empty list of [from, to]")
    calibration = CalibrationSettings(
        eta=float(_number(c["eta"], "bandit.calibration.eta", low=0.0, low_open=True)),
        steps=int(_number(c["steps"], "bandit.calibration.steps", low=10, integer=True)),
        window=_window(c["window"], "bandit.calibration.window"),
        refresh=choice(c["refresh"], "bandit.calibration.refresh", bandit.REFRESHES),
        gradient=choice(c["gradient"], "bandit.calibration.gradient", bandit.GRADIENTS),
        report_windows=tuple(_window(w, f"bandit.calibration.report_windows[{i}]") for i, w in enumerate(windows)),
    )

    k = merged(DEFAULTS["classification"], cfg["classification"], "bandit.classification")
    classification = ClassificationSettings(
        tolerance=float(_number(k["tolerance"], "bandit.classification.tolerance", low=0.0, high=1.0,
                                low_open=True, high_open=True)),
        collapse_tolerance=float(_number(k["collapse_tolerance"], "bandit.classification.collapse_tolerance",
                                         low=0.0, high=1.0, low_open=True, high_open=True)),
        settle_fraction=float(_number(k["settle_fraction"], "bandit.classification.settle_fraction", low=0.0,
                                      high=1.0, low_open=True)),
    )

    s = merged(DEFAULTS["sweep"], cfg["sweep"], "bandit.sweep")
    k_refs = s["k_refs"]
    if not isinstance(k_refs, (list, tuple)) or not k_refs:
        raise InputError("config key 'bandit.sweep.k_refs' must be a non-empty list of integers >= 1")
    sweep = SweepSettings(
        eta=float(_number(s["eta"], "bandit.sweep.eta", low=0.0, low_open=True)),
        mu=float(_number(s["mu"], "bandit.sweep.mu", low=0.0, high=1.0, high_open=True)),
        k_refs=tuple(int(_number(v, f"bandit.sweep.k_refs[{i}]", low=1, integer=True)) for i, v in enumerate(k_refs)),
        steps=int(_number(s["steps"], "bandit.sweep.steps", low=2, integer=True)),
        settle_steps=int(_number(s["settle_steps"], "bandit.sweep.settle_steps", low=10, integer=True)),
        dense_k_ref_max=int(_number(s["dense_k_ref_max"], "bandit.sweep.dense_k_ref_max", low=1, integer=True)),
    )

    m = merged(DEFAULTS["regime_map"], cfg["regime_map"], "bandit.regime_map")
    e = merged(DEFAULTS["regime_map"]["etas"], m["etas"], "bandit.regime_map.etas")
    kr = merged(DEFAULTS["regime_map"]["k_refs"], m["k_refs"], "bandit.regime_map.k_refs")
    eta_min = _number(e["min"], "bandit.regime_map.etas.min", low=0.0, low_open=True)
    eta_max = _number(e["max"], "bandit.regime_map.etas.max", low=eta_min, low_open=True)
    eta_n = _number(e["n"], "bandit.regime_map.etas.n", low=2, integer=True)
    k_min = _number(kr["min"], "bandit.regime_map.k_refs.min", low=1, integer=True)
    k_max = _number(kr["max"], "bandit.regime_map.k_refs.max", low=k_min + 1, integer=True)
    k_n = _number(kr["n"], "bandit.regime_map.k_refs.n", low=2, integer=True)
    regime_map = RegimeMapSettings(
        etas=np.geomspace(eta_min, eta_max, eta_n),
        k_refs=np.unique(np.round(np.linspace(k_min, k_max, k_n)).astype(int)),
        mu=float(_number(m["mu"], "bandit.regime_map.mu", low=0.0, high=1.0, high_open=True)),
        steps=int(_number(m["steps"], "bandit.regime_map.steps", low=10, integer=True)),
    )

    readings = cfg["readings"]
    if not isinstance(readings, (list, tuple)) or not readings:
        raise InputError("config key 'bandit.readings' must be a non-empty list of {refresh, gradient}")
    parsed = []
    for i, item in enumerate(readings):
        item = merged({"refresh": None, "gradient": None}, item, f"bandit.readings[{i}]")
        parsed.append(Reading(choice(item["refresh"], f"bandit.readings[{i}].refresh", bandit.REFRESHES),
                              choice(item["gradient"], f"bandit.readings[{i}].gradient", bandit.GRADIENTS)))
    if len(set(parsed)) != len(parsed):
        raise InputError("config key 'bandit.readings' lists the same reading twice")

    v = merged(DEFAULTS["sensitivity"], cfg["sensitivity"], "bandit.sensitivity")
    shapes = v["rewards"]
    if not isinstance(shapes, (list, tuple)):
        raise InputError("config key 'bandit.sensitivity.rewards' must be a list of reward vectors (may be empty)")
    sensitivity = SensitivitySettings(
        rewards=tuple(tuple(_rewards(x, f"bandit.sensitivity.rewards[{i}]").tolist()) for i, x in enumerate(shapes)),
        etas_n=int(_number(v["etas_n"], "bandit.sensitivity.etas_n", low=2, integer=True)),
        k_refs_n=int(_number(v["k_refs_n"], "bandit.sensitivity.k_refs_n", low=2, integer=True)),
        steps=int(_number(v["steps"], "bandit.sensitivity.steps", low=10, integer=True)),
    )
    return BanditSettings(rewards=rewards, beta=beta, calibration=calibration, classification=classification,
                          sweep=sweep, regime_map=regime_map, readings=tuple(parsed), sensitivity=sensitivity)


def _rewards(value: Any, key: str) -> np.ndarray:
    if not isinstance(value, (list, tuple)) or len(value) < 2:
        raise InputError(f"config key '{key}' must be a list of at least two numbers, got {value!r}")
    rewards = np.array([_number(x, f"{key}[{i}]") for i, x in enumerate(value)], dtype=float)
    if np.ptp(rewards) == 0:
        raise InputError(f"config key '{key}' must not be all equal (the advantage would be 0/0)")
    return rewards
