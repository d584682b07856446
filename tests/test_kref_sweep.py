"""The deep-network K_ref sweep's read-outs (pgrpo.fit.kref_sweep) on curves with known parameters."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pgrpo import theory
from pgrpo.fit.kref_sweep import (
    COLLAPSED,
    FLAT,
    SweepRun,
    agreement,
    baseline_of,
    classify_run,
    measure_stiffness,
    predicted_regime,
)

STEPS = np.arange(1, 201)


def _run(reward, eta=1e-3, k_ref=1, mu=0.9, name="r", ratio=None):
    return SweepRun(name, eta, k_ref, mu, STEPS, np.asarray(reward, float), ratio)


def test_stiffness_is_recovered_from_the_saturation_rate_of_eq14():
    K, eta, mu, k_ref = 20.0, 1e-3, 0.9, 1
    lam = eta * K / ((1 - mu) - K * eta * k_ref)  # Eq. 14 with Eq. 9's coefficients: 0.25 per step
    rng = np.random.default_rng(0)
    reward = 0.8 - 0.6 * np.exp(-lam * (STEPS - 1)) + rng.normal(0, 0.002, STEPS.size)
    estimate = measure_stiffness(_run(reward, eta, k_ref, mu))
    assert estimate.rate == pytest.approx(lam, rel=0.03)
    assert estimate.K == pytest.approx(K, rel=0.03)


def test_regimes_of_planted_curves():
    rng = np.random.default_rng(1)
    noise = rng.normal(0, 0.02, STEPS.size)
    t = STEPS - 1.0
    monotone = 0.7 - 0.5 * np.exp(-t / 30) + noise
    zeta, omega = 0.15, 0.12  # an underdamped step response from rest: rings about its target
    wd = omega * math.sqrt(1 - zeta ** 2)
    ringing = 0.7 - 0.5 * np.exp(-zeta * omega * t) * (np.cos(wd * t) + zeta * omega / wd * np.sin(wd * t)) + noise
    falling = 0.6 - 0.5 * (1 - np.exp(-t / 40)) + noise
    flat = 0.4 + noise
    labels = {name: classify_run(_run(curve), K=10.0, smoothing=5).label
              for name, curve in (("monotone", monotone), ("ringing", ringing), ("falling", falling),
                                  ("flat", flat))}
    assert labels == {"monotone": "monotone", "ringing": "oscillatory", "falling": COLLAPSED, "flat": FLAT}


def test_predictions_follow_prop9_and_eq10():
    K, mu = 10.0, 0.9
    assert predicted_regime(float(theory.damping_ratio(1e-4, mu, K, 1)), (1 - mu) - K * 1e-4) == "monotone"
    eta = 0.02  # K eta K_ref = 0.2 * K_ref > 1 - mu = 0.1 already at K_ref = 1
    regime = classify_run(_run(0.7 - 0.5 * np.exp(-(STEPS - 1) / 30.0), eta=eta), K=K, smoothing=5)
    assert regime.margin == pytest.approx((1 - mu) - K * eta) and regime.predicted == "unstable"
    assert regime.label == "monotone" and regime.agrees is False
    assert agreement([regime]) == (0, 1)


def test_baseline_is_the_smallest_eta_then_k_ref():
    runs = [_run(np.zeros(200), eta=e, k_ref=k, name=f"{e}-{k}") for e, k in ((1e-3, 1), (1e-4, 4), (1e-4, 2))]
    assert baseline_of(runs).name == "0.0001-2"


def test_is_ratio_summary():
    ratio = np.full(200, np.nan)
    ratio[::2] = np.linspace(1.0, 3.0, 100)
    regime = classify_run(_run(0.7 - 0.5 * np.exp(-(STEPS - 1) / 30.0), ratio=ratio), K=5.0, smoothing=5)
    assert regime.is_ratio_max_max == pytest.approx(3.0)
    assert regime.is_ratio_max_median == pytest.approx(2.0, abs=0.02)


@pytest.mark.parametrize("knob", ["num_iterations", "steps_per_generation"])
def test_sweep_training_realises_k_ref_in_trl_terms(knob):
    from pgrpo.grpo.training_config import refresh_interval, resolve_training
    from pgrpo.stages.kref_sweep import sweep_training

    base = {"learning_rate": 5e-4, "gradient_accumulation_steps": 4, "max_steps": 300}
    sweep = {"refresh": knob, "training": {"max_steps": 50}}
    out = resolve_training(sweep_training(base, sweep, 2e-3, 8))
    assert refresh_interval(out) == 8  # Eq. 3's K_ref = steps_per_generation x num_iterations / accumulation
    assert out["learning_rate"] == 2e-3 and out["max_steps"] == 50 and out["merge_adapters"] is False
    assert base["gradient_accumulation_steps"] == 4  # the workflow's own section is not modified


def test_run_kref_sweep_end_to_end_on_written_logs(tmp_path):
    import json

    import pandas as pd

    from pgrpo.stages.kref_sweep import run_kref_sweep

    K, mu = 20.0, 0.9
    logs, metas = [], []
    rng = np.random.default_rng(3)
    for eta, k_ref in ((1e-3, 1), (1e-3, 4), (2e-3, 1)):
        lam = eta * K / ((1 - mu) - K * eta * k_ref)
        folder = tmp_path / f"lr{eta:g}_kref{k_ref}"
        folder.mkdir()
        reward = 0.8 - 0.6 * np.exp(-lam * (STEPS - 1)) + rng.normal(0, 0.002, STEPS.size)
        pd.DataFrame({"step": STEPS, "reward": reward, "importance_sampling_ratio_max": 1.0 + 0.01 * k_ref}).to_csv(
            folder / "log.csv", index=False)
        (folder / "meta.json").write_text(json.dumps({"eta": eta, "mu": mu, "k_ref": k_ref}))
        logs.append(str(folder / "log.csv"))
        metas.append(str(folder / "meta.json"))
    out = {name: str(tmp_path / name) for name in ("t.csv", "t.md", "s.json", "f.png")}
    summary = run_kref_sweep(logs, metas, out["t.csv"], out["t.md"], out["s.json"], out_png=out["f.png"],
                             smoothing=1)
    assert summary["baseline"] == "lr0.001_kref1"
    assert summary["stiffness"]["K"] == pytest.approx(K, rel=0.05)
    table = pd.read_csv(out["t.csv"])
    assert list(table["label"]) == ["monotone"] * 3
    assert table["k_eta_k_ref"].tolist() == pytest.approx([K * 1e-3, K * 4e-3, K * 2e-3], rel=0.05)
    assert (tmp_path / "f.png").stat().st_size > 0 and "Agreement with Theorem 7" in (tmp_path / "t.md").read_text()


def test_noise_sd_of_white_noise_on_a_trend():
    from pgrpo.fit.intervals import robust_noise_sd as noise_sd

    rng = np.random.default_rng(7)
    y = np.linspace(0, 1, 20000) + rng.normal(0, 0.05, 20000)
    assert noise_sd(y) == pytest.approx(0.05, rel=0.03)


def test_a_sweep_without_a_measurable_k_still_writes_its_outputs(tmp_path):
    import json

    import pandas as pd

    from pgrpo.stages.kref_sweep import run_kref_sweep

    logs, metas = [], []
    for k_ref in (1, 2):
        folder = tmp_path / f"r{k_ref}"
        folder.mkdir()
        pd.DataFrame({"step": np.arange(1, 9), "reward": 0.0}).to_csv(folder / "log.csv", index=False)
        (folder / "meta.json").write_text(json.dumps({"eta": 1e-3, "mu": 0.9, "k_ref": k_ref}))
        logs.append(str(folder / "log.csv"))
        metas.append(str(folder / "meta.json"))
    summary = run_kref_sweep(logs, metas, str(tmp_path / "t.csv"), str(tmp_path / "t.md"), str(tmp_path / "s.json"),
                             out_png=str(tmp_path / "f.png"))
    assert math.isnan(summary["stiffness"]["K"])
    assert "K could not be measured" in (tmp_path / "t.md").read_text()
    assert (tmp_path / "f.png").stat().st_size > 0
