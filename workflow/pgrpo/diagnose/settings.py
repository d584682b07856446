"""The ``diagnostics:`` config section: thresholds of the four diagnostics of Figures 2-5 and of the failure
modes (``diagnostics.modes``, :mod:`pgrpo.diagnose.modes`) with the post-training toolkit's rules
(``diagnostics.toolkit``, :mod:`pgrpo.diagnose.toolkit`), validated with one-line errors naming the key.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from pgrpo.diagnose.records import plain
from pgrpo.errors import InputError


@dataclass(frozen=True)
class RewardHackingConfig:
    eval_columns: tuple[str, ...] = ("eval_reward", "eval_accuracy")  # first one present is used
    window_fraction: float = 0.45  # rolling window, fraction of the eval-step span (Figure 2)
    interior: tuple[float, float] = (0.1, 0.9)  # progress range whose windows the rho summary uses
    rho_min: float = 0.5  # median interior rho below this: hacking read-out
    deficit_max: float = 0.15  # mean u_train - u_eval above this: hacking read-out
    min_eval_points: int = 4  # fewer eval points: inconclusive (the fit has 3 parameters)
    min_window_points: int = 3  # points a window needs (each of train and eval) for a slope
    min_rise_over_noise: float = 2.0  # a fitted rise R_inf - R0 smaller than this x residual s.d. is unresolved
    # without an eval column, the reward function that scores the task itself stands in for the held-out curve
    # (a reward of two or more functions): this one by name, else the one with a word of its name that begins
    # with one of gold_names (any case; in order of preference: the first word that matches decides) and none
    # that begins with one of not_gold_names (a format term or a penalty does not score the task); where none is
    # named so and gold_by_elimination (opt-in: measured on dev and not kept as a default, docs/live-history.md's
    # third round), the one function left when not_gold_names rule out all the others
    gold_reward: str | None = None
    gold_names: tuple[str, ...] = ("correct", "accura", "exact", "gold", "verif", "answer")
    not_gold_names: tuple[str, ...] = ("format", "penal")
    gold_by_elimination: bool = False
    # a reward rising beyond its noise whose gold term (a term of its sum) carries less than this share of the rise
    gold_share_min: float = 0.1


@dataclass(frozen=True)
class ModeCollapseConfig:
    drift_max: float = 0.3  # |linear-trend change over the run| / early level above this: drifting
    separation_max: float = 1.5  # late sigma_adv^2 ratio between two G outside [1/x, x]: separated
    frac_zero_std_max: float = 0.5  # late collapsed-prompt fraction at or above this: high
    frac_zero_std_rise_max: float = 0.2  # late minus early collapsed-prompt fraction at or above this: climbing


@dataclass(frozen=True)
class PolicyConcentrationConfig:
    entropy_drop_min: float = 0.2  # relative entropy fall (early -> late) at or above this: concentration
    kl_rise_min: float = 0.001  # KL late minus early (nats) at or above this: KL rising
    saturation_fraction: float = 0.9  # reward saturation = this fraction of the fitted rise


@dataclass(frozen=True)
class StabilityConfig:
    growth_unstable: float = 10.0  # last-half grad_norm growth factor (log-linear trend) for exponential growth
    growth_warning: float = 3.0  # ... for "approaching threshold"
    growth_min_r2: float = 0.5  # the log-linear trend must explain this much to count as exponential growth
    spike_factor: float = 10.0  # spike: grad_norm > this x median of the previous spike_window values
    spike_window: int = 10
    spikes_unstable: int = 3  # this many spikes or more: unstable (1 or 2: approaching threshold)
    is_ratio_high: float = 10.0  # late median IS-ratio max at or above this: diverging
    is_growth_warning: float = 2.0  # last-half IS-ratio max growth factor at or above this: rising
    threshold_warning: float = 0.5  # K eta K_ref / (1 - mu) at or above this: approaching threshold
    K: float | None = None  # measured stiffness; None: from the train reward's fitted omega_n (Eq. 9)


@dataclass(frozen=True)
class DegeneracyConfig:
    frac_high: float = 0.5  # zero-spread fraction at or above this at a step: its groups carry little signal
    stuck_position: float = 0.5  # ... and the reward in the lower part of its range (<= this): stuck, not solved


@dataclass(frozen=True)
class ConcentrationModeConfig:
    collapse_drop: float = 0.5  # late entropy <= (1 - this) x early: entropy collapse
    explosion_factor: float = 2.0  # late entropy >= this x early: entropy explosion
    saturation_fraction: float = 0.9  # a collapse after the reward reached this share of its rise is benign


@dataclass(frozen=True)
class NoLearningConfig:
    rise_over_noise: float = 3.0  # net rise (and peak rise) within this many standard errors: not learning
    bound_z: float = 1.645  # one-sided z of the upper bound on the trend's rise that sets the severity (power)


@dataclass(frozen=True)
class RegressionConfig:
    drop_over_noise: float = 3.0  # fall from the peak beyond this many standard errors (plus the max-of-k bias)
    min_drop_fraction: float = 0.3  # ... and at least this share of what the run had gained by its peak


@dataclass(frozen=True)
class TruncationConfig:
    clipped_ratio_max: float = 0.5  # completions/clipped_ratio at or above this: most completions cut at the cap
    length_at_cap: float = 0.9  # mean completion length at or above this share of the cap: at the cap
    pinned_cv: float = 0.01  # without a cap: mean length this flat (s.d./mean) at its run maximum is pinned
    max_completion_length: int | None = None  # the run's cap (meta.json max_completion_length wins)


@dataclass(frozen=True)
class InstabilityConfig:
    kl_spike_factor: float = 10.0  # KL spike: KL > this x median of the previous values ...
    kl_spike_min: float = 0.1  # ... and at least this many nats above it
    crash_over_noise: float = 3.0  # reward crash: the reward after a spike this many s.e. below the reward before
    is_ratio_low: float = 0.5  # late median IS-ratio mean (or min) at or below this: the low side diverging
    vanishing_fraction: float = 0.9  # grad_norm 0 on this share of the late steps with zero-spread groups
    climb_factor: float = 4.0  # climb: grad_norm (KL) >= this x the median of the points 10-30 before ...
    climb_points: int = 3  # ... at this many consecutive logged points, with a reward crash from the first


@dataclass(frozen=True)
class OscillationConfig:
    significance: float = 0.01  # false-alarm rate of the largest spectral peak against the AR(1) red-noise null
    min_period_points: int = 4  # shortest period tested, in logged points (what the logging interval resolves)
    min_cycles: float = 2.0  # longest period tested: the run spans at least this many cycles of it
    amplitude_over_noise: float = 1.0  # fitted amplitude at least this many per-point noise s.d.
    min_visible_cycles: float = 1.5  # the fitted envelope above the amplitude level for at least this many cycles
    refresh_tolerance: float = 0.1  # a period within this share of a known periodic refresh is its sawtooth
    agreement: float = 0.3  # Theorem 7's period within this share of the observed one: they agree


@dataclass(frozen=True)
class LengthConfig:
    length_drop: float = 0.4  # late mean length <= (1 - this) x the early one: length collapse
    length_rise: float = 0.3  # late mean length >= (1 + this) x the early one: the completions grew
    min_partial_correlation: float = 0.3  # partial correlation of reward and length given the step, at least this
    per_token_drop: float = 0.1  # reward per token late <= (1 - this) x early: the reward grew slower than the length


@dataclass(frozen=True)
class ModesConfig:
    rule_set: str = "ours"  # "ours" or "toolkit": which rule set fills the modes (pgrpo diagnose --rules)
    smoothing_fraction: float = 0.1  # moving-average window of the mode read-outs, share of the logged points
    min_points: int = 8  # fewest logged values a mode needs (fewer: could not run)
    persistence: float = 0.6  # a failure began at the first step from which this share of the later points shows it
    reward_range: tuple[float, ...] | None = None  # [lo, hi] of the reward if known; else the run's own range
    min_episode_fraction: float = 0.1  # a resolved episode this long (share of the logged points) is flagged
    degeneracy: DegeneracyConfig = field(default_factory=DegeneracyConfig)
    concentration: ConcentrationModeConfig = field(default_factory=ConcentrationModeConfig)
    no_learning: NoLearningConfig = field(default_factory=NoLearningConfig)
    regression: RegressionConfig = field(default_factory=RegressionConfig)
    truncation: TruncationConfig = field(default_factory=TruncationConfig)
    instability: InstabilityConfig = field(default_factory=InstabilityConfig)
    oscillation: OscillationConfig = field(default_factory=OscillationConfig)
    length: LengthConfig = field(default_factory=LengthConfig)


@dataclass(frozen=True)
class ToolkitConfig:
    """The GRPO rules of microsoft/post-training-toolkit (``diagnostics/heuristics.py``), windows in logged rows."""

    reward_std_min: float = 0.01  # group reward std: mean of the last reward_std_window rows below this
    reward_std_window: int = 20
    entropy_drop: float = 0.5  # entropy: last-window mean below (1 - this) x first-window mean ...
    entropy_floor: float = 0.1  # ... or below this floor
    entropy_window: int = 30
    kl_cap: float = 0.3  # KL above this at any step
    length_drift: float = 0.3  # |last-window mean / first-window mean - 1| of the completion length above this
    length_window: int = 30
    clip_ratio_max: float = 0.25  # mean clip ratio of the last clip_window rows above this
    clip_window: int = 20
    grad_factor: float = 10.0  # last grad_norm above this x the mean of the first min(grad_window, n/3) rows
    grad_window: int = 50


@dataclass(frozen=True)
class DiagnosticsConfig:
    early_fraction: float = 0.2
    late_fraction: float = 0.2
    min_points: int = 10  # fewest logged values a level/trend read-out needs (fewer: inconclusive)
    smoothing: int = 5  # centred moving average (logged points) for the train reward in u_train and the entropy
    reward_hacking: RewardHackingConfig = field(default_factory=RewardHackingConfig)
    mode_collapse: ModeCollapseConfig = field(default_factory=ModeCollapseConfig)
    policy_concentration: PolicyConcentrationConfig = field(default_factory=PolicyConcentrationConfig)
    stability: StabilityConfig = field(default_factory=StabilityConfig)
    modes: ModesConfig = field(default_factory=ModesConfig)
    toolkit: ToolkitConfig = field(default_factory=ToolkitConfig)


RULE_SETS: tuple[str, ...] = ("ours", "toolkit")


def default_config_dict() -> dict[str, Any]:
    """The ``diagnostics:`` section's defaults as plain data (what ``config.yaml`` may override)."""
    return plain(dataclasses.asdict(DiagnosticsConfig()))


def _check_special(key: str, value: Any) -> Any:
    """The keys whose default is None or text: K, max_completion_length, reward_range, rule_set, gold_reward."""
    name = key.split(".")[-1]
    if name == "gold_reward":
        if value is not None and not (isinstance(value, str) and value):
            raise InputError(f"diagnostics.{key} must be a reward function's name or null, got {value!r}")
        return value
    if name == "rule_set":
        if value not in RULE_SETS:
            raise InputError(f"diagnostics.{key} must be one of {', '.join(RULE_SETS)}, got {value!r}")
        return value
    if value is None:
        return None
    if name == "max_completion_length":
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(f"diagnostics.{key} must be an integer >= 1 or null, got {value!r}")
        return value
    if name == "reward_range":
        ok = isinstance(value, (list, tuple)) and len(value) == 2 and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value)
        if not ok or not value[0] < value[1]:
            raise InputError(f"diagnostics.{key} must be [lo, hi] with lo < hi or null, got {value!r}")
        return (float(value[0]), float(value[1]))
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or not math.isfinite(value):
        raise InputError(f"diagnostics.{key} must be a positive number or null, got {value!r}")
    return float(value)


_SPECIAL = ("K", "max_completion_length", "reward_range", "rule_set", "gold_reward")


def _check_value(key: str, default: Any, value: Any) -> Any:
    if key.split(".")[-1] in _SPECIAL:
        return _check_special(key, value)
    if isinstance(default, tuple):
        if not isinstance(value, (list, tuple)) or (key.endswith("interior") and len(value) != 2):
            raise InputError(f"diagnostics.{key} must be a list like {list(default)}, got {value!r}")
        if key.endswith("interior"):
            lo, hi = (_check_value(f"{key}[]", 0.5, v) for v in value)
            if not 0 <= lo < hi <= 1:
                raise InputError(f"diagnostics.{key} must be [lo, hi] with 0 <= lo < hi <= 1, got {value!r}")
            return (lo, hi)
        if not value or not all(isinstance(v, str) and v for v in value):
            raise InputError(f"diagnostics.{key} must be a non-empty list of column names, got {value!r}")
        return tuple(value)
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise InputError(f"diagnostics.{key} must be true or false, got {value!r}")
        return value
    if isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(f"diagnostics.{key} must be an integer >= 1, got {value!r}")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise InputError(f"diagnostics.{key} must be a positive number, got {value!r}")
    fractions = ("early_fraction", "late_fraction", "window_fraction", "saturation_fraction", "entropy_drop_min",
                 "frac_zero_std_max", "interior[]", "frac_high", "stuck_position", "persistence", "collapse_drop",
                 "smoothing_fraction", "min_drop_fraction", "clipped_ratio_max", "length_at_cap", "vanishing_fraction",
                 "entropy_drop", "clip_ratio_max", "is_ratio_low", "min_episode_fraction", "significance",
                 "refresh_tolerance", "length_drop", "min_partial_correlation", "per_token_drop")
    if key.split(".")[-1] in fractions and not value <= 1:
        raise InputError(f"diagnostics.{key} must be in (0, 1], got {value!r}")
    return float(value)


def _build(cls: type, section: Mapping[str, Any] | None, prefix: str) -> Any:
    if section is None:
        section = {}
    if not isinstance(section, Mapping):
        raise InputError(f"diagnostics{'.' + prefix if prefix else ''} must be a mapping, got {section!r}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(section) - set(fields))
    if unknown:
        where = f"diagnostics.{prefix + '.' if prefix else ''}{unknown[0]}"
        raise InputError(f"{where}: unknown key (known: {', '.join(fields)})")
    values = {}
    defaults = cls()
    for name, f in fields.items():
        key = f"{prefix + '.' if prefix else ''}{name}"
        default = getattr(defaults, name)
        if dataclasses.is_dataclass(default):
            values[name] = _build(type(default), section.get(name), key)
        elif name in section:
            values[name] = _check_value(key, default, section[name])
    return cls(**values)


def diagnostics_config(section: Mapping[str, Any] | None) -> DiagnosticsConfig:
    """The ``diagnostics`` config section, validated against the defaults; a bad key or value raises InputError."""
    return _build(DiagnosticsConfig, section, "")
