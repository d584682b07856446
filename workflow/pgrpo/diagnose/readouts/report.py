"""All four diagnostics of Figures 2-5 on one run or a grid of runs, as named records with their Markdown verdicts,
and the seven failure modes built on them (``modes``, :mod:`pgrpo.diagnose.modes`) under the selected rule set
(``diagnostics.modes.rule_set``: ours or the post-training toolkit's, :mod:`pgrpo.diagnose.rulesets`)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from pgrpo.diagnose.readouts.concentration import policy_concentration
from pgrpo.diagnose.readouts.hacking import held_out_column, reward_hacking
from pgrpo.diagnose.readouts.mode_collapse import mode_collapse, mode_collapse_across_G
from pgrpo.diagnose.modes.record import RunVerdicts
from pgrpo.diagnose.numerics import fit_three_phase_curve
from pgrpo.diagnose.records import (
    DIAGNOSTICS,
    MODE_COLLAPSE,
    POLICY_CONCENTRATION,
    REWARD_HACKING,
    STABILITY,
    TITLES,
    DiagnosticResult,
    RunCurves,
    plain,
)
from pgrpo.diagnose.rulesets import run_rule_set
from pgrpo.diagnose.settings import DiagnosticsConfig
from pgrpo.diagnose.readouts.stability import stability


def _run_fits(curves: RunCurves, config: DiagnosticsConfig, given: Mapping[str, Any] | None) -> dict[str, Any]:
    """The three-phase fits the diagnostics share: train reward and the eval column (given ones win)."""
    fits = dict(given or {})
    eval_column, _ = held_out_column(curves, config.reward_hacking)
    for column in ("reward", eval_column):
        if column is not None and column not in fits and curves.has(column):
            steps, values, _ = curves.series(column)
            fits[column] = fit_three_phase_curve(steps, values)
    return fits


def diagnose_run(curves: RunCurves, config: DiagnosticsConfig | None = None,
                 fits: Mapping[str, Any] | None = None) -> list[DiagnosticResult]:
    """The four diagnostics of one run, in the paper's order."""
    config = config or DiagnosticsConfig()
    fits = _run_fits(curves, config, fits)
    return [
        reward_hacking(curves, config, fits),
        mode_collapse(curves, config),
        policy_concentration(curves, config, fits),
        stability(curves, config, fits),
    ]


@dataclass
class DiagnosticsReport:
    """All diagnostics of all runs: ``results`` per (model, G) and, for mode collapse, per model across G."""

    results: list[DiagnosticResult]
    models: list[str]
    group_sizes: dict[str, list[int]]
    config: dict[str, Any]
    inputs: dict[str, Any] = field(default_factory=dict)
    verdicts: list[RunVerdicts] = field(default_factory=list)

    def of(self, diagnostic: str, model: str | None = None, G: int | None | str = "any") -> list[DiagnosticResult]:
        return [r for r in self.results if r.diagnostic == diagnostic and (model is None or r.model == model)
                and (G == "any" or r.G == G)]

    def get(self, diagnostic: str, model: str, G: int | None) -> DiagnosticResult | None:
        found = [r for r in self.of(diagnostic, model, G) if not r.across_G]
        return found[0] if found else None

    def to_dict(self, with_series: bool = True) -> dict[str, Any]:
        """Everything; ``series`` only for the derived curves of Figure 2 (u, rho): the other figures plot the
        aggregate columns themselves, which are in the aggregate CSVs already."""
        return plain({
            "models": self.models, "group_sizes": self.group_sizes, "inputs": self.inputs, "config": self.config,
            "diagnostics": {name: [r.to_dict(with_series and name == REWARD_HACKING) for r in self.of(name)]
                            for name in DIAGNOSTICS},
            "modes": [v.to_dict() for v in self.verdicts],
        })

    def to_markdown(self, title: str = "GRPO training diagnostics (Figures 2-5)", modes_section: str = "") -> str:
        """One section per diagnostic; ``modes_section`` (the failure modes, rendered by the caller) goes first."""
        lines = [f"# {title}", ""]
        if modes_section:
            lines += [modes_section.rstrip(), ""]
        if self.inputs:
            for key, value in self.inputs.items():
                shown = ", ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
                lines.append(f"- {key}: {shown or 'none'}")
            lines.append("")
        lines += ["Progress is `step / last step` of each run; early/late = first/last "
                  f"{self.config.get('early_fraction', 0.2):.0%}/{self.config.get('late_fraction', 0.2):.0%} of the "
                  "steps. Thresholds are the `diagnostics:` config section (listed at the end).", ""]
        for index, name in enumerate(DIAGNOSTICS, 1):
            lines += [f"## {index}. {TITLES[name]}", "", READING[name], ""]
            results = self.of(name)
            lines += [r.line() for r in results] or ["- no runs"]
            lines.append("")
        lines += ["## Thresholds", "", "```json", json.dumps(self.config, indent=1), "```", ""]
        return "\n".join(lines)


READING: dict[str, str] = {
    REWARD_HACKING: ("Healthy: train and eval co-saturate, `u_eval ≈ u_train` (deficit ≈ 0) and the coupling ratio "
                     "`rho = lambda_eval/|lambda_train|` ≈ 1 in the interior of training. Hacking: eval progress lags "
                     "(deficit > 0) and `rho -> 0`."),
    MODE_COLLAPSE: ("Healthy: `sigma_adv^2/G` on a flat plateau and a collapsed-prompt fraction "
                    "(`frac_reward_zero_std`) near zero. A downward drift together with a climbing fraction is "
                    "the collapse signature; a late `sigma_adv^2` ratio between group sizes far from 1 is a "
                    "G-dependence Lemma 6 does not predict."),
    POLICY_CONCENTRATION: ("Benign shift: KL rises while entropy stays put. Concentration: entropy falls by more than "
                           "the threshold (with KL rising). Dangerous when the entropy drop comes before the reward "
                           "has saturated (90% of its fitted rise): Assumption 1 then fails while the reward still "
                           "moves."),
    STABILITY: ("Stable: bounded grad_norm (no exponential growth over the last half, no spikes) and a bounded "
                "IS-ratio max; Prop. 9 predicts instability when `K eta K_ref > 1 - mu`."),
}


def diagnose_runs(runs: Sequence[RunCurves], config: DiagnosticsConfig | None = None,
                  fits: Mapping[tuple[str, int], Mapping[str, Any]] | None = None,
                  progress_bar: bool = True) -> DiagnosticsReport:
    """The four diagnostics for every run, plus mode collapse across G per model."""
    from tqdm.auto import tqdm

    config = config or DiagnosticsConfig()
    fits = fits or {}
    per_run: list[DiagnosticResult] = []
    models: list[str] = []
    group_sizes: dict[str, list[int]] = {}
    verdicts: list[RunVerdicts] = []
    for curves in tqdm(runs, desc="diagnose", leave=False, disable=None if progress_bar else True):
        if curves.model not in models:
            models.append(curves.model)
        if curves.G is not None:
            group_sizes.setdefault(curves.model, []).append(curves.G)
        run_fits = _run_fits(curves, config, fits.get((curves.model, curves.G)))
        mine = diagnose_run(curves, config, run_fits)
        per_run += mine
        verdicts.append(run_rule_set(config.modes.rule_set, curves, config, mine, run_fits))
    results = []
    for name in DIAGNOSTICS:
        for model in models:
            mine = [r for r in per_run if r.diagnostic == name and r.model == model]
            results += sorted(mine, key=lambda r: r.G or 0)
            if name == MODE_COLLAPSE:
                results.append(mode_collapse_across_G(sorted(mine, key=lambda r: r.G or 0), config))
    return DiagnosticsReport(results, models, {m: sorted(g) for m, g in group_sizes.items()},
                             plain(dataclasses.asdict(config)), verdicts=verdicts)


@dataclass
class DiagnosisReport:
    """The diagnostics one log allows: ``results`` (one per diagnostic; ``verdict == "not run"`` with the missing
    column named in ``reason`` where it could not run), the columns found and where each came from."""

    source: str
    model: str
    G: int | None
    n_steps: int
    columns_found: dict[str, str]
    columns_ignored: list[str]
    results: list[DiagnosticResult]
    config: dict[str, Any]
    verdicts: RunVerdicts | None = None

    @property
    def not_run(self) -> dict[str, str]:
        return {r.diagnostic: r.reason for r in self.results if not r.ran}

    def result(self, diagnostic: str) -> DiagnosticResult:
        return next(r for r in self.results if r.diagnostic == diagnostic)

    def to_dict(self, with_series: bool = False) -> dict[str, Any]:
        """``summary`` and ``modes`` (the failure modes, see :class:`RunVerdicts`), then the Figures 2-5 read-outs."""
        modes = self.verdicts.to_dict() if self.verdicts else {}
        return plain({"source": self.source, "model": self.model, "G": self.G, "n_steps": self.n_steps,
                       "rule_set": modes.get("rule_set"), "summary": modes.get("summary"),
                       "modes": modes.get("modes", {}), "first_step": modes.get("first_step"),
                       "last_step": modes.get("last_step"),
                       "columns_found": self.columns_found, "columns_ignored": self.columns_ignored,
                       "not_run": self.not_run, "config": self.config,
                       "diagnostics": {r.diagnostic: r.to_dict(with_series) for r in self.results}})

    def to_markdown(self) -> str:
        found = ", ".join(f"`{k}`" + (f" (from `{v}`)" if v != k else "") for k, v in self.columns_found.items())
        lines = [f"# Diagnosis of {self.source}", "",
                 f"- run: {self.model}" + (f", G={self.G}" if self.G else ", G unknown (sigma^2 not divided by G)"),
                 f"- steps: {self.n_steps}; columns used: {found}", ""]
        for index, r in enumerate(self.results, 1):
            lines += [f"## {index}. {TITLES[r.diagnostic]}", "", READING[r.diagnostic], "", r.line(), ""]
        if self.not_run:
            lines += ["## Could not run", ""] + [f"- {TITLES[k]}: {v}" for k, v in self.not_run.items()] + [""]
        return "\n".join(lines)


def diagnose_curves(curves: RunCurves, config: DiagnosticsConfig) -> DiagnosisReport:
    fits = _run_fits(curves, config, None)
    results = diagnose_run(curves, config, fits)
    verdicts = run_rule_set(config.modes.rule_set, curves, config, results, fits)
    ignored = [c for c in curves.frame.columns if c != "step" and c not in curves.column_sources
               and not c.endswith("_sd")]
    return DiagnosisReport(curves.source, curves.model, curves.G, int(curves.frame["step"].nunique()),
                           dict(curves.column_sources), ignored, results, plain(dataclasses.asdict(config)),
                           verdicts)
