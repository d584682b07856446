"""Tests of pgrpo.diagnostics (Figures 2-5, Sections 5.2-5.5) on constructed curves with known answers.

Expected numbers come from closed forms: exponential relaxations (Eq. 14) whose -log(R_inf - R) is exactly linear,
the three-phase law (Eq. 16-17), linear sigma^2 drifts, exponential gradient growth, and Prop. 9's product.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from pgrpo.diagnose.readouts.concentration import policy_concentration  # noqa: E402
from pgrpo.diagnose.readouts.hacking import local_relaxation_rate, reward_hacking, rolling_coupling_ratio  # noqa: E402
from pgrpo.diagnose.readouts.mode_collapse import mode_collapse, mode_collapse_across_G  # noqa: E402
from pgrpo.diagnose.numerics import fit_three_phase_curve, saturation_step  # noqa: E402
from pgrpo.diagnose.records import (  # noqa: E402
    APPROACHING,
    BENIGN_SHIFT,
    CO_SATURATING,
    COLLAPSE,
    CONCENTRATION_AFTER,
    CONCENTRATION_BEFORE,
    HACKING,
    HEALTHY,
    INCONCLUSIVE,
    MODE_COLLAPSE,
    NOT_RUN,
    POLICY_CONCENTRATION,
    REWARD_HACKING,
    STABILITY,
    STABLE,
    UNSTABLE,
    WARNING,
    RunCurves,
)
from pgrpo.diagnose.settings import default_config_dict, diagnostics_config  # noqa: E402
from pgrpo.diagnose.readouts.stability import stability  # noqa: E402
from pgrpo.errors import InputError
from pgrpo.stages.diagnose import diagnose_log, run_diagnose, run_diagnostics  # noqa: E402
from scipy.optimize import brentq

STEPS = np.arange(1, 301, dtype=float)
EVAL_EVERY = 20


def three_phase(t, r0, r_inf, omega):
    """Eq. 16 from rest: R = R_inf - (R_inf - R0)(1 + w t) exp(-w t)."""
    t = np.asarray(t, float)
    return r_inf - (r_inf - r0) * (1 + omega * t) * np.exp(-omega * t)


def u_three_phase(t, omega):
    """Eq. 17: the doubly normalised progress of a three-phase curve."""
    t = np.asarray(t, float)
    return 1 - (1 + omega * t) * np.exp(-omega * t)


def run_frame(steps=STEPS, eval_every=EVAL_EVERY, seed=0, train_omega=0.03, eval_omega=0.03, train_noise=0.02,
              eval_noise=0.005, **columns) -> pd.DataFrame:
    """A run's per-step curves: three-phase train reward (0.2 -> 0.8), eval reward (0.1 -> 0.5) every eval_every
    steps, plus any extra columns given as arrays (or callables of the step)."""
    rng = np.random.default_rng(seed)
    frame = {"step": steps,
             "reward": three_phase(steps, 0.2, 0.8, train_omega) + rng.normal(0, train_noise, steps.size)}
    eval_reward = np.full(steps.size, np.nan)
    on = steps % eval_every == 0
    eval_reward[on] = three_phase(steps[on], 0.1, 0.5, eval_omega) + rng.normal(0, eval_noise, on.sum())
    frame["eval_reward"] = eval_reward
    for name, value in columns.items():
        frame[name] = value(steps) if callable(value) else value
    return pd.DataFrame(frame)


def curves(frame: pd.DataFrame, G: int | None = 4, model: str = "m", meta=None) -> RunCurves:
    return RunCurves(model, G, frame, "constructed", meta)


# ---------------------------------------------------------------------------------------------------------------------
# 1. reward hacking (Figure 2)
# ---------------------------------------------------------------------------------------------------------------------


def test_rho_on_exact_exponential_pair_is_the_ratio_of_rates():
    # -log(R_inf - R) = lambda t - log A exactly, so every window's slope is lambda: rho = 0.008 / 0.02 = 0.4
    t = STEPS
    train = 0.9 - 0.7 * np.exp(-0.02 * t)
    eval_steps = t[t % 10 == 0]
    eval_values = 0.6 - 0.5 * np.exp(-0.008 * eval_steps)
    ratio = rolling_coupling_ratio(t, train, 0.9, eval_steps, eval_values, 0.6, window_fraction=0.45)
    assert ratio.window_steps == pytest.approx(0.45 * (300 - 10))
    assert np.isfinite(ratio.rho).all()
    np.testing.assert_allclose(ratio.lambda_train, 0.02, rtol=1e-9)
    np.testing.assert_allclose(ratio.lambda_eval, 0.008, rtol=1e-9)
    np.testing.assert_allclose(ratio.rho, 0.4, rtol=1e-9)


def test_rho_guards_points_at_or_above_the_plateau():
    # points with R >= R_inf have no log; they are dropped, the rest still give the exact rate
    t = np.arange(0, 50, dtype=float)
    values = 1.0 - np.exp(-0.1 * t)
    values[::5] = 1.2  # above the plateau
    assert local_relaxation_rate(t, values, 1.0) == pytest.approx(0.1, rel=1e-9)
    assert math.isnan(local_relaxation_rate(t[:2], values[:2], 1.0, min_points=3))


def test_co_saturating_train_and_eval_give_rho_one_and_zero_deficit():
    result = reward_hacking(curves(run_frame()))
    assert result.verdict == CO_SATURATING
    assert abs(result.numbers["deficit"]) < 0.05  # same omega: u_eval = u_train exactly (Eq. 17)
    assert result.numbers["rho_interior_median"] == pytest.approx(1.0, abs=0.25)
    assert "rho" in result.reason and "deficit" in result.reason


def test_eval_lagging_train_is_the_hacking_signature():
    omega, omega_eval = 0.03, 0.0075
    result = reward_hacking(curves(run_frame(eval_omega=omega_eval, eval_noise=0.0)))
    eval_steps = STEPS[STEPS % EVAL_EVERY == 0]
    expected_deficit = float(np.mean(u_three_phase(eval_steps, omega) - u_three_phase(eval_steps, omega_eval)))
    assert expected_deficit > 0.3
    assert result.numbers["deficit"] == pytest.approx(expected_deficit, abs=0.03)
    assert result.numbers["rho_interior_median"] < 0.5
    assert result.verdict == HACKING


def test_flat_eval_while_train_rises_is_hacking_and_too_few_eval_points_is_inconclusive():
    frame = run_frame()
    frame["eval_reward"] = np.where(frame["step"] % EVAL_EVERY == 0, 0.3, np.nan)
    assert reward_hacking(curves(frame)).verdict == HACKING
    frame = run_frame(eval_every=100)  # 3 eval points
    result = reward_hacking(curves(frame))
    assert result.verdict == INCONCLUSIVE and "3 eval_reward point" in result.reason


def test_reward_hacking_falls_back_to_eval_accuracy_and_names_missing_columns():
    frame = run_frame().rename(columns={"eval_reward": "eval_accuracy"})
    assert reward_hacking(curves(frame)).numbers["eval_column"] == "eval_accuracy"
    result = reward_hacking(curves(run_frame().drop(columns=["eval_reward"])))
    assert result.verdict == NOT_RUN and "eval_reward" in result.reason


# ---------------------------------------------------------------------------------------------------------------------
# 2. mode collapse (Figure 3)
# ---------------------------------------------------------------------------------------------------------------------


def _mode_frame(sigma2, frac):
    return run_frame(reward_std=lambda s: np.sqrt(sigma2(s / s[-1])), frac_reward_zero_std=lambda s: frac(s / s[-1]))


def test_flat_sigma2_is_healthy_and_G_invariant_sigma_gives_ratio_one():
    flat = [mode_collapse(curves(_mode_frame(lambda x: np.full(x.size, 0.2), lambda x: 0.05 + 0 * x), G=G))
            for G in (4, 16)]
    for result in flat:
        assert result.verdict == HEALTHY
        assert result.numbers["sigma2_over_G_drift"] == pytest.approx(0.0, abs=1e-9)
        assert result.numbers["sigma2_over_G_late"] == pytest.approx(0.2 / result.G)
    across = mode_collapse_across_G(flat)
    pair = across.numbers["pairs"][0]
    assert pair["sigma2_ratio"] == pytest.approx(1.0)
    assert pair["sigma2_over_G_ratio"] == pytest.approx(4.0)  # Lemma 6: sigma^2/G scales as 1/G
    assert across.verdict == HEALTHY and across.across_G


def test_drifting_sigma2_with_climbing_collapsed_fraction_is_collapse():
    # sigma^2(x) = 0.2 (1 - 0.6 x): OLS slope -0.12 per unit progress (exact for a line), early level = mean over
    # x <= x0 + 0.2 (1 - x0) of 0.2 (1 - 0.6 x)
    result = mode_collapse(curves(_mode_frame(lambda x: 0.2 * (1 - 0.6 * x), lambda x: 0.05 + 0.55 * x)))
    x = STEPS / 300
    early_x = x[x <= x[0] + 0.2 * (1 - x[0])]
    expected = -0.12 * (1 - x[0]) / (0.2 * (1 - 0.6 * early_x.mean()))
    assert result.numbers["sigma2_over_G_drift"] == pytest.approx(expected, rel=1e-9)
    assert result.numbers["frac_zero_std_late"] > 0.5
    assert result.verdict == COLLAPSE


def test_sigma2_separated_between_G_is_flagged():
    runs = [mode_collapse(curves(_mode_frame(lambda x: np.full(x.size, s2), lambda x: 0.05 + 0 * x), G=G))
            for G, s2 in ((4, 0.2), (16, 0.05))]
    across = mode_collapse_across_G(runs)
    assert across.numbers["pairs"][0]["sigma2_ratio"] == pytest.approx(4.0)
    assert across.numbers["pairs"][0]["separated"]
    assert across.verdict == WARNING


def test_mode_collapse_with_one_column_missing_runs_on_the_other():
    result = mode_collapse(curves(run_frame(frac_reward_zero_std=lambda s: 0.05 + 0 * s)))
    assert result.missing == ["reward_std"] and result.verdict == HEALTHY
    result = mode_collapse(curves(run_frame()))
    assert result.verdict == NOT_RUN and "reward_std" in result.reason


# ---------------------------------------------------------------------------------------------------------------------
# 3. policy concentration (Figure 4)
# ---------------------------------------------------------------------------------------------------------------------


def test_saturation_step_solves_the_three_phase_90_percent_equation():
    x90 = brentq(lambda x: (1 + x) * math.exp(-x) - 0.1, 0.1, 20)
    fit = fit_three_phase_curve(STEPS, three_phase(STEPS, 0.2, 0.8, 0.05))
    assert saturation_step(fit, 0.9) == pytest.approx(x90 / 0.05, rel=1e-4)
    assert x90 == pytest.approx(3.88972, abs=1e-5)


def test_stable_entropy_with_rising_kl_is_a_benign_shift():
    frame = run_frame(entropy=lambda s: 1.0 + 0.01 * np.sin(s), kl=lambda s: 0.05 * s / s[-1])
    result = policy_concentration(curves(frame))
    assert result.verdict == BENIGN_SHIFT
    assert abs(result.numbers["entropy_change"]) < 0.02


def _sigmoid_drop(center):
    return lambda s: 1.0 - 0.7 / (1 + np.exp(-(s - center) / 5))


def test_entropy_collapse_before_saturation_is_dangerous_and_after_is_not():
    # slow reward (omega 0.01: t90 = 389 > 300 steps, never saturates) with the entropy drop at step ~80
    before = run_frame(train_omega=0.01, entropy=_sigmoid_drop(80), kl=lambda s: 0.05 * s / s[-1])
    result = policy_concentration(curves(before))
    assert result.verdict == CONCENTRATION_BEFORE
    assert result.numbers["saturation_step"] == pytest.approx(3.88972 / 0.01, rel=0.1)
    # -20% of the early level (1.0) is crossed where 0.7 sigmoid = 0.2: s = 80 + 5 ln(0.2/0.5) ~ 75.4
    assert result.numbers["entropy_drop_step"] == pytest.approx(80 + 5 * math.log(0.2 / 0.5), abs=3)
    # fast reward (omega 0.05: t90 = 78) with the entropy drop at step ~200
    after = run_frame(train_omega=0.05, entropy=_sigmoid_drop(200), kl=lambda s: 0.05 * s / s[-1])
    result = policy_concentration(curves(after))
    assert result.verdict == CONCENTRATION_AFTER
    assert result.numbers["saturation_step"] == pytest.approx(3.88972 / 0.05, rel=0.1)


def test_policy_concentration_missing_entropy_is_not_run():
    result = policy_concentration(curves(run_frame(kl=lambda s: 0.01 * s)))
    assert result.verdict == NOT_RUN and "'entropy'" in result.reason


# ---------------------------------------------------------------------------------------------------------------------
# 4. stability (Figure 5, Prop. 9)
# ---------------------------------------------------------------------------------------------------------------------

META = {"eta": 1e-5, "mu": 0.9, "k_ref": 2}


def test_bounded_grad_norm_is_stable_and_prop9_product_is_hand_checked():
    frame = run_frame(grad_norm=lambda s: 1.0 + 0.2 * np.sin(s / 7),
                      importance_sampling_ratio_max=lambda s: 2.5 + 0 * s)
    config = diagnostics_config({"stability": {"K": 1000.0}})
    result = stability(curves(frame, meta=META), config)
    assert result.verdict == STABLE
    prop9 = result.numbers["prop9"]
    assert prop9["K_eta_Kref"] == pytest.approx(1000 * 1e-5 * 2)  # 0.02
    assert prop9["threshold_ratio"] == pytest.approx(0.02 / 0.1)
    assert result.numbers["is_max_late_median"] == pytest.approx(2.5)


def test_exponential_grad_growth_is_unstable_with_the_exact_growth_factor():
    frame = run_frame(grad_norm=lambda s: 0.5 * np.exp(0.02 * s))
    result = stability(curves(frame))
    half = STEPS[STEPS >= 1 + 0.5 * 299]
    assert result.numbers["grad_log_slope"] == pytest.approx(0.02, rel=1e-9)
    assert result.numbers["grad_growth_last_half"] == pytest.approx(math.exp(0.02 * (half[-1] - half[0])), rel=1e-9)
    assert result.verdict == UNSTABLE


def test_spikes_and_prop9_beyond_threshold():
    def spiky(count):
        def grad(s):
            g = np.ones(s.size)
            g[[100, 150, 200][:count]] = 50.0
            return g
        return grad

    assert stability(curves(run_frame(grad_norm=spiky(1)))).verdict == APPROACHING
    result = stability(curves(run_frame(grad_norm=spiky(3))))
    assert result.verdict == UNSTABLE and result.numbers["n_spikes"] == 3
    config = diagnostics_config({"stability": {"K": 6000.0}})  # 6000 * 1e-5 * 2 = 0.12 > 1 - 0.9
    result = stability(curves(run_frame(grad_norm=lambda s: 1.0 + 0 * s), meta=META), config)
    assert result.numbers["prop9"]["threshold_ratio"] == pytest.approx(1.2)
    assert result.verdict == UNSTABLE


def test_stability_K_from_fitted_omega_inverts_eq9():
    # omega_n^2 = 2 eta K / ((1 + mu) + K eta K_ref^2)  =>  K = omega^2 (1 + mu) / (eta (2 - omega^2 K_ref^2))
    frame = run_frame(train_noise=0.0, grad_norm=lambda s: 1.0 + 0 * s)
    result = stability(curves(frame, meta=META))
    omega = 0.03
    expected = omega**2 * 1.9 / (1e-5 * (2 - omega**2 * 4))
    assert result.numbers["prop9"]["K"] == pytest.approx(expected, rel=1e-3)


# ---------------------------------------------------------------------------------------------------------------------
# reading logs: trainer_state.json, TRL-prefixed CSV, missing columns, bad files
# ---------------------------------------------------------------------------------------------------------------------


def _trl_rows(n=60, eval_every=5):
    rows = []
    for step in range(1, n + 1):
        reward = float(three_phase(step, 0.2, 0.8, 0.08))
        rows.append({"step": step, "epoch": step / n, "loss": 0.0, "reward": reward, "reward_std": 0.4,
                     "frac_reward_zero_std": 0.1, "entropy": 1.0, "kl": 0.001 * step, "grad_norm": 1.0,
                     "learning_rate": 1e-5, "completions/mean_length": 40.0})
        if step % eval_every == 0:
            rows.append({"step": step, "epoch": step / n, "eval_loss": 0.0,
                         "eval_reward": float(three_phase(step, 0.1, 0.5, 0.08))})
    rows.append({"step": n, "train_runtime": 12.0, "train_loss": 0.0})
    return rows


def test_trainer_state_json_is_parsed_and_diagnosed(tmp_path):
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps({"global_step": 60, "log_history": _trl_rows()}))
    report = diagnose_log(str(path), meta={"G": 8, "eta": 1e-5, "mu": 0.9, "k_ref": 1})
    assert report.n_steps == 60 and report.G == 8
    assert {"reward", "reward_std", "entropy", "kl", "grad_norm", "eval_reward"} <= set(report.columns_found)
    assert report.result(REWARD_HACKING).numbers["n_eval_points"] == 12
    assert report.result(REWARD_HACKING).verdict == CO_SATURATING
    assert report.result(POLICY_CONCENTRATION).verdict == BENIGN_SHIFT
    assert report.result(STABILITY).verdict == STABLE
    assert "importance_sampling_ratio_max" in report.result(STABILITY).reason  # named as missing


def test_train_prefixed_csv_is_parsed_and_aliases_mapped(tmp_path):
    frame = pd.DataFrame(_trl_rows())
    frame = frame.rename(columns={"step": "train/global_step", "reward": "train/reward",
                                  "reward_std": "train/reward_std", "entropy": "train/entropy",
                                  "frac_reward_zero_std": "train/frac_reward_zero_std",
                                  "kl": "train/kl", "grad_norm": "train/grad_norm", "eval_reward": "eval/reward"})
    frame["train/sampling/importance_sampling_ratio/max"] = np.where(frame["train/reward"].notna(), 1.3, np.nan)
    path = tmp_path / "wandb_export.csv"
    frame.to_csv(path, index=False)
    report = diagnose_log(str(path))
    assert report.columns_found["importance_sampling_ratio_max"] == "sampling/importance_sampling_ratio/max"
    assert report.columns_found["eval_reward"] == "eval_reward"
    assert report.model == "wandb_export" and report.G is None
    assert report.result(STABILITY).numbers["is_max_late_median"] == pytest.approx(1.3)
    assert report.result(MODE_COLLAPSE).ran  # sigma^2 without G
    markdown = report.to_markdown()
    assert "G unknown" in markdown and "## 4. Training stability" in markdown


def test_missing_columns_are_named_and_the_rest_runs(tmp_path):
    frame = pd.DataFrame({"step": STEPS, "reward": three_phase(STEPS, 0.2, 0.8, 0.03), "grad_norm": 1.0})
    path = tmp_path / "log.csv"
    frame.to_csv(path, index=False)
    report = diagnose_log(str(path))
    assert set(report.not_run) == {REWARD_HACKING, MODE_COLLAPSE, POLICY_CONCENTRATION}
    assert "eval_reward" in report.not_run[REWARD_HACKING]
    assert "entropy" in report.not_run[POLICY_CONCENTRATION]
    assert "reward_std" in report.not_run[MODE_COLLAPSE]
    assert report.result(STABILITY).verdict == STABLE
    assert "Could not run" in report.to_markdown()


def test_unreadable_or_unrecognisable_logs_raise_input_error(tmp_path):
    with pytest.raises(InputError, match="not found"):
        diagnose_log(str(tmp_path / "nope.csv"))
    garbage = tmp_path / "garbage.csv"
    garbage.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe" * 50)
    with pytest.raises(InputError, match="garbage.csv"):
        diagnose_log(str(garbage))
    unknown = tmp_path / "other.csv"
    pd.DataFrame({"step": [1, 2], "foo": [1.0, 2.0], "bar": [3.0, 4.0]}).to_csv(unknown, index=False)
    with pytest.raises(InputError, match=r"other\.csv.*found: foo, bar"):
        diagnose_log(str(unknown))
    bad_json = tmp_path / "trainer_state.json"
    bad_json.write_text("{not json")
    with pytest.raises(InputError, match="trainer_state.json"):
        diagnose_log(str(bad_json))


def test_config_rejects_unknown_keys_and_bad_values():
    with pytest.raises(InputError, match=r"diagnostics\.reward_hacking\.foo"):
        diagnostics_config({"reward_hacking": {"foo": 1}})
    with pytest.raises(InputError, match=r"diagnostics\.early_fraction"):
        diagnostics_config({"early_fraction": 1.5})
    with pytest.raises(InputError, match=r"diagnostics\.reward_hacking\.interior"):
        diagnostics_config({"reward_hacking": {"interior": [0.9, 0.1]}})
    config = diagnostics_config({"stability": {"K": 3}, "reward_hacking": {"interior": [0.2, 0.8]}})
    assert config.stability.K == 3.0 and config.reward_hacking.interior == (0.2, 0.8)
    assert default_config_dict()["reward_hacking"]["window_fraction"] == 0.45


# ---------------------------------------------------------------------------------------------------------------------
# the stage: aggregates -> JSON, Markdown, Figures 2-5
# ---------------------------------------------------------------------------------------------------------------------


def _write_aggregate(path, frame: pd.DataFrame) -> str:
    out = {"step": frame["step"]}
    for column in frame.columns:
        if column != "step":
            out[f"{column}_mean"] = frame[column]
            out[f"{column}_sd"] = 0.02
            out[f"{column}_n"] = 2
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(out).to_csv(path, index=False)
    return str(path)


def _full_frame(**kw):
    return run_frame(reward_std=lambda s: 0.45 + 0 * s, frac_reward_zero_std=lambda s: 0.05 + 0 * s,
                     entropy=lambda s: 1.0 + 0 * s, kl=lambda s: 0.05 * s / s[-1], grad_norm=lambda s: 1.0 + 0 * s,
                     importance_sampling_ratio_max=lambda s: 2.5 + 0 * s, **kw)


def test_run_diagnostics_one_model_two_G_writes_everything(tmp_path):
    paths = [_write_aggregate(tmp_path / "aggregate" / "tiny" / "G4.csv", _full_frame()),
             _write_aggregate(tmp_path / "aggregate" / "tiny" / "G16.csv", _full_frame(eval_omega=0.0075))]
    meta = tmp_path / "train" / "tiny" / "G4" / "seed42" / "meta.json"
    meta.parent.mkdir(parents=True)
    meta.write_text(json.dumps({"model": "tiny", "G": 4, "seed": 42, **META}))
    report = run_diagnostics(paths, str(tmp_path / "d.json"), str(tmp_path / "d.md"), str(tmp_path / "fig"),
                                meta_jsons=[str(meta)])
    for n in (2, 3, 4, 5):
        for ext in ("pdf", "png"):
            assert (tmp_path / "fig" / f"figure{n}.{ext}").stat().st_size > 1000
    assert report.get(REWARD_HACKING, "tiny", 4).verdict == CO_SATURATING
    assert report.get(REWARD_HACKING, "tiny", 16).verdict == HACKING
    assert "prop9" in report.get(STABILITY, "tiny", 4).numbers
    assert "prop9" not in report.get(STABILITY, "tiny", 16).numbers  # no meta for G=16
    data = json.loads((tmp_path / "d.json").read_text())
    assert [r["G"] for r in data["diagnostics"]["mode_collapse"]] == [4, 16, None]
    markdown = (tmp_path / "d.md").read_text()
    assert markdown.count("## ") == 5  # four diagnostics + thresholds
    assert "**tiny, G=4**: **co-saturating**" in markdown and "**tiny, G=16**: **hacking signature**" in markdown


def test_run_diagnostics_three_models_with_missing_columns_and_fit_json(tmp_path):
    from pgrpo.fit.least_squares import fit_three_phase

    paths = []
    for model in ("a", "b", "c"):
        for G in (4, 16):
            frame = _full_frame(seed=G)
            if model == "b":
                frame = frame.drop(columns=["entropy", "kl", "importance_sampling_ratio_max"])
            paths.append(_write_aggregate(tmp_path / "aggregate" / model / f"G{G}.csv", frame))
    # a fitting-stage JSON (pgrpo.stages.fit.run_fit's layout) whose train-reward fit differs from what the aggregate
    # would give (plateau 0.9, not 0.8): the diagnostics must reuse it rather than refit
    given = fit_three_phase(STEPS, three_phase(STEPS, 0.2, 0.9, 0.03))
    payload = {"model": "a", "groups": {"4": {"columns": {"reward": {"fits": {"three_phase": given.to_dict()}}}}}}
    fit_json = tmp_path / "fit" / "a" / "fit.json"
    fit_json.parent.mkdir(parents=True)
    fit_json.write_text(json.dumps(payload))
    report = run_diagnostics(paths, str(tmp_path / "d.json"), str(tmp_path / "d.md"), str(tmp_path / "fig"),
                                fit_jsons=[str(fit_json)])
    assert report.models == ["a", "b", "c"]
    assert report.get(POLICY_CONCENTRATION, "b", 4).verdict == NOT_RUN
    assert report.get(POLICY_CONCENTRATION, "a", 4).verdict == BENIGN_SHIFT
    assert "importance_sampling_ratio_max" in report.get(STABILITY, "b", 16).missing
    assert report.get(REWARD_HACKING, "a", 4).numbers["train_fit"]["R_inf"] == pytest.approx(0.9, abs=1e-6)
    assert report.get(REWARD_HACKING, "a", 16).numbers["train_fit"]["R_inf"] == pytest.approx(0.8, abs=0.02)
    assert (tmp_path / "fig" / "figure4.png").is_file()
    with pytest.raises(InputError, match="fit JSON"):
        fit_json.write_text(json.dumps({"something": 1}))
        run_diagnostics(paths, str(tmp_path / "d.json"), str(tmp_path / "d.md"), fit_jsons=[str(fit_json)])


def test_run_diagnostics_input_errors(tmp_path):
    with pytest.raises(InputError, match="not found"):
        run_diagnostics([str(tmp_path / "aggregate" / "m" / "G4.csv")], str(tmp_path / "d.json"),
                           str(tmp_path / "d.md"))
    path = tmp_path / "aggregate" / "m" / "G4.csv"
    path.parent.mkdir(parents=True)
    pd.DataFrame({"x": [1]}).to_csv(path, index=False)
    with pytest.raises(InputError, match="no 'step' column"):
        run_diagnostics([str(path)], str(tmp_path / "d.json"), str(tmp_path / "d.md"))
    with pytest.raises(InputError, match=r"diagnostics\.stability\.K"):
        run_diagnostics([str(path)], str(tmp_path / "d.json"), str(tmp_path / "d.md"),
                           diagnostics={"stability": {"K": -1}})


def test_run_diagnose_writes_json_markdown_and_figures(tmp_path):
    log = tmp_path / "tiny" / "G4" / "seed42" / "log.csv"
    log.parent.mkdir(parents=True)
    _full_frame().to_csv(log, index=False)
    report = run_diagnose(str(log), str(tmp_path / "d.json"), str(tmp_path / "d.md"),
                             out_dir_figures=str(tmp_path / "fig"))
    assert report.model == "tiny" and report.G == 4  # from the path
    assert not report.not_run
    data = json.loads((tmp_path / "d.json").read_text())
    assert data["diagnostics"]["reward_hacking"]["verdict"] == CO_SATURATING
    assert (tmp_path / "fig" / "figure2.pdf").is_file() and (tmp_path / "fig" / "figure5.png").is_file()


def test_a_solved_task_is_saturation_not_collapse_and_a_mid_range_sigma_fall_is_collapse():
    """A binary reward rising 0.2 -> 0.95 with sigma^2 = p (1 - p) (the binomial ceiling: its late/early ratio is
    what saturation explains) and zero-spread groups climbing to 0.8 is a solved task; the same groups with sigma^2
    falling to a tenth while the reward stops at 0.7 (ceiling ratio 0.21 / 0.16 > 1) are Figure 3's collapse."""
    def p_solved(x):
        return 0.2 + 0.75 * x

    solved = mode_collapse(curves(_mode_frame(lambda x: p_solved(x) * (1 - p_solved(x)), lambda x: 0.1 + 0.7 * x)
                                  .assign(reward=lambda f: p_solved(f["step"] / f["step"].iloc[-1]))))
    assert solved.numbers["saturated"] is True and solved.verdict == HEALTHY
    assert solved.reason.startswith("reward at") and "not a collapse" in solved.reason

    def p_mid(x):
        return 0.2 + 0.5 * x

    collapsed = mode_collapse(curves(_mode_frame(lambda x: 0.2 * (1 - 0.9 * x), lambda x: 0.1 + 0.7 * x)
                                     .assign(reward=lambda f: p_mid(f["step"] / f["step"].iloc[-1]))))
    assert collapsed.numbers["saturated"] is False and collapsed.verdict == COLLAPSE
    assert "collapsed beyond saturation" in collapsed.reason


def test_eta_is_read_from_the_logs_learning_rate(tmp_path):
    """TRL logs the learning rate at every step: its median positive value is the run's eta for Theorem 7 (here a
    warm-up 0 -> 2e-5 then constant 2e-5 over 10 steps: the median of 1e-5, 2e-5 x 9 is 2e-5)."""
    import json

    from pgrpo.stages.diagnose import log_curves

    history = [{"step": s, "reward": 0.1 * s, "learning_rate": 1e-5 if s == 1 else 2e-5, "loss": 0.0}
               for s in range(1, 11)]
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps({"log_history": history}))
    curves = log_curves(str(path), None, None)
    assert curves.meta["eta"] == 2e-5 and "learning_rate" in curves.meta["eta_source"]
    given = log_curves(str(path), {"eta": 3e-6}, None)
    assert given.meta["eta"] == 3e-6  # meta.json or --lr win over the log
