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


def _write_run(folder, reward, eta, k_ref, mu=0.9, optimizer="sgd", effective=None):
    import json

    import pandas as pd

    folder.mkdir(parents=True)
    frame = {"step": STEPS[: len(reward)], "reward": reward, "importance_sampling_ratio_max": 1.0 + 0.01 * k_ref}
    if effective is not None:
        frame["effective_learning_rate"] = effective
    pd.DataFrame(frame).to_csv(folder / "log.csv", index=False)
    (folder / "meta.json").write_text(json.dumps({"eta": eta, "mu": mu, "k_ref": k_ref, "optimizer": optimizer}))


def test_grid_from_a_planted_baseline_then_the_sweep_end_to_end(tmp_path):
    import json

    import pandas as pd

    from pgrpo.stages.kref_sweep import run_kref_grid, run_kref_sweep

    K, mu, eta = 20.0, 0.9, 1e-4
    lam = eta * K / ((1 - mu) - K * eta)  # Eq. 14 with Eq. 9's coefficients
    rng = np.random.default_rng(3)
    arm = tmp_path / "sgd"
    _write_run(arm / "baseline", 0.8 - 0.6 * np.exp(-lam * (STEPS - 1)) + rng.normal(0, 0.01, STEPS.size), eta, 1, mu)
    sweep = {"grid": {"k_refs": [1, 3, 9], "rows": ["zeta1", "top"], "span": [0.1, 10.0]}, "smoothing": 9}
    grid = run_kref_grid("sgd", str(arm / "baseline/log.csv"), str(arm / "baseline/meta.json"),
                         str(arm / "grid.json"), sweep)
    assert grid["measured"] and grid["stiffness"]["K"] == pytest.approx(K, rel=0.1)
    assert len(grid["cells"]) == 6 and grid["span"][1] == pytest.approx(10.0, rel=0.02)
    assert grid["rows"] == ["zeta1", "top"]
    for cell in grid["cells"]:  # every cell monotone: the table counts them against Theorem 7
        t = STEPS - 1.0
        _write_run(arm / cell["run"], 0.8 - 0.6 * np.exp(-t / 20) + rng.normal(0, 0.005, STEPS.size),
                   cell["learning_rate"], cell["k_ref"], mu)
    bench = tmp_path / "bench" / "sgd"
    bench.mkdir(parents=True)
    (bench / "baseline.tsv").write_text("s\th:m:s\n50\t0:00:50\n")
    out = {name: str(tmp_path / name) for name in ("t.csv", "t.md", "s.json", "f.png")}
    summary = run_kref_sweep([str(arm / "grid.json")], out["t.csv"], out["t.md"], out["s.json"], out_png=out["f.png"],
                             benchmarks_dir=str(tmp_path / "bench"))
    table = pd.read_csv(out["t.csv"])
    assert list(table["label"]) == ["monotone"] * 6
    x = table["k_eta_k_ref"].to_numpy() / (1 - mu)
    assert x.min() < 0.1 + 1e-9 and x.max() == pytest.approx(10.0, rel=0.05)  # brackets the threshold
    judged = summary["agreement"]["judged"]
    agree_expected = int(sum(r["predicted"] == "monotone" for r in summary["runs"]))
    assert judged == 6 and summary["agreement"]["agree"] == agree_expected
    assert summary["job_seconds"] == 50 and "sgd/baseline" in summary["jobs"]
    assert json.loads((arm / "summary.json").read_text())["arm"] == "sgd" and (arm / "table.md").exists()
    text = (tmp_path / "t.md").read_text()
    assert "Agreement with Theorem 7 (sgd)" in text and "Rows: zeta1" in text and "not trained" not in text
    assert "prediction was resolvable" in text and "predicted overshoot / tolerance" in text


def test_a_grid_without_its_top_row_says_why():
    from pgrpo.stages.kref_sweep import _rows_text

    assert "top row is not trained" in _rows_text(["zeta1", "threshold"])
    assert "not trained" not in _rows_text(["zeta1", "threshold", "top"])


def test_a_baseline_that_does_not_rise_stops_the_arm_with_its_reason(tmp_path):
    from pgrpo.stages.kref_sweep import run_kref_grid, run_kref_sweep

    arm = tmp_path / "adam"
    rng = np.random.default_rng(5)
    _write_run(arm / "baseline", 0.3 + rng.normal(0, 0.1, STEPS.size), 5e-4, 1, 0.8, "adam",
               effective=np.full(STEPS.size, 1e-3))
    grid = run_kref_grid("adam", str(arm / "baseline/log.csv"), str(arm / "baseline/meta.json"),
                         str(arm / "grid.json"), {})
    assert not grid["measured"] and grid["cells"] == [] and grid["message"]
    assert grid["eta_per_learning_rate"] == pytest.approx(2.0)  # Adam read against its measured step
    summary = run_kref_sweep([str(arm / "grid.json")], str(tmp_path / "t.csv"), str(tmp_path / "t.md"),
                             str(tmp_path / "s.json"), out_png=str(tmp_path / "f.png"))
    assert summary["agreement"] == {"agree": 0, "judged": 0}
    assert "K could not be measured" in (tmp_path / "t.md").read_text()


def test_stiffness_quality_bounds():
    from pgrpo.fit.kref_sweep import StiffnessEstimate, stiffness_problem

    def est(r2, K, K_se):
        return StiffnessEstimate("b", K, 0.1, 0.01, 1e-3, 0.8, 1, 0.2, 0.6, r2, "", K_se, 1e-3)

    assert stiffness_problem(est(0.9, 10.0, 2.0)) == ""
    assert "R²" in stiffness_problem(est(0.7, 10.0, 2.0))
    assert "relative standard error" in stiffness_problem(est(0.9, 10.0, 3.0))


@pytest.mark.parametrize("rows", [("zeta1", "top"), ("zeta1", "threshold", "top"), ("zeta1", "threshold")])
def test_bracketing_grid_places_zeta1_and_the_threshold_inside(rows):
    from pgrpo.fit.kref_sweep import bracketing_grid

    K, mu, ladder = 3.0, 0.8, (1, 3, 9)
    grid = bracketing_grid(K, mu, ladder, (0.1, 10.0), rows)
    assert len(grid.etas) == len(rows) and list(grid.etas) == sorted(grid.etas)
    lo, hi = grid.etas[0], grid.etas[-1]
    # Eq. 10 at the lowest row: zeta >= 1 at K_ref = 1, < 1 at K_ref = 3 (zeta = 1 inside the ladder)
    assert theory.damping_ratio(lo, mu, K, 1) >= 1 > theory.damping_ratio(lo, mu, K, 3)
    assert grid.span[0] <= 0.1 + 1e-9
    if "top" in rows:
        assert K * hi * 9 == pytest.approx(10 * (1 - mu), rel=0.01)  # the top of the span
        assert K * hi * 1 > 1 - mu  # every cell of the top row past Prop. 9's threshold (10 > 9)
    if "threshold" in rows:  # Prop. 9's threshold between K_ref 3 and 9 on its row: x = x* sqrt(9 / 3) at 9
        mid = grid.etas[1]
        assert K * mid * 3 < 1 - mu < K * mid * 9
        assert K * mid * 9 == pytest.approx(math.sqrt(3) * (1 - mu), rel=0.01)


def test_bracketing_grid_refuses_an_unknown_or_single_row():
    from pgrpo.fit.kref_sweep import bracketing_grid

    for rows in (("zeta1",), ("zeta1", "middle")):
        with pytest.raises(ValueError, match="rows"):
            bracketing_grid(3.0, 0.8, (1, 3, 9), (0.1, 10.0), rows)


def test_adam_effective_step_from_the_optimizer_state():
    torch = pytest.importorskip("torch")
    from pgrpo.grpo.effective_step import effective_learning_rate

    p = torch.nn.Parameter(torch.zeros(2))
    opt = torch.optim.Adam([p], lr=1e-2, betas=(0.8, 0.999), eps=1e-8)
    p.grad = torch.tensor([3.0, 4.0])
    opt.step()
    # after one step v_hat = g^2: (1 - beta1) lr sum(g^2 / |g|) / sum(g^2) = 0.2e-2 (3 + 4) / 25
    assert effective_learning_rate(opt) == pytest.approx(0.2e-2 * 7 / 25, rel=1e-6)
    sgd = torch.optim.SGD([p], lr=0.05, momentum=0.8)
    assert effective_learning_rate(sgd) == 0.05


def test_sgd_arm_is_torch_heavy_ball_with_momentum_mu():
    pytest.importorskip("trl")
    from pgrpo.grpo.training_config import build_grpo_config, resolve_training, validate_training

    t = validate_training(resolve_training({"optimizer": "sgd", "adam_beta1": 0.8, "max_steps": 4,
                                            "per_device_train_batch_size": 4}), 4)
    args = build_grpo_config(t, 4, 0, "/tmp/unused", has_eval=False, cuda=False)
    assert str(getattr(args.optim, "value", args.optim)) == "sgd" and args.optim_args == "momentum=0.8"
    from pgrpo.errors import InputError

    with pytest.raises(InputError, match="training.optimizer"):
        validate_training(resolve_training({"optimizer": "lion"}), 4)


def test_arm_section_merges_sweep_arm_and_baseline_overrides():
    from pgrpo.stages.kref_sweep import arm_sweep_section

    sweep = {"training": {"max_steps": 90, "adam_beta1": 0.8},
             "arms": {"sgd": {"baseline": {"learning_rate": 0.01, "training": {"max_steps": 160}}}}}
    assert arm_sweep_section(sweep, "sgd")["training"] == {"max_steps": 90, "adam_beta1": 0.8, "optimizer": "sgd"}
    assert arm_sweep_section(sweep, "sgd", baseline=True)["training"]["max_steps"] == 160


def test_noise_sd_of_white_noise_on_a_trend():
    from pgrpo.fit.intervals import robust_noise_sd as noise_sd

    rng = np.random.default_rng(7)
    y = np.linspace(0, 1, 20000) + rng.normal(0, 0.05, 20000)
    assert noise_sd(y) == pytest.approx(0.05, rel=0.03)


def test_a_baseline_row_trains_at_the_baseline_rate_without_its_own_cell():
    from pgrpo.fit.kref_sweep import bracketing_grid

    # K = 0.0125, mu = 0.8: the threshold row puts K eta K_ref = 0.2 at sqrt(16 x 64) = 32, eta = 0.2 / (0.0125 x 32)
    grid = bracketing_grid(0.0125, 0.8, (1, 4, 16, 64), (0.1, 10.0), ("baseline", "threshold"),
                           baseline_learning_rate=0.3)
    assert grid.learning_rates == (0.3, 0.5)
    assert grid.cells == [(0.3, 4), (0.3, 16), (0.3, 64), (0.5, 1), (0.5, 4), (0.5, 16), (0.5, 64)]
    lo, hi = grid.span  # 0.0125 x 0.5 x 1 / 0.2 and 0.0125 x 0.5 x 64 / 0.2 over the trained cells
    assert lo == pytest.approx(0.03125) and hi == pytest.approx(2.0)
    assert grid.threshold_k_refs == pytest.approx((0.2 / (0.0125 * 0.3), 32.0))
    # a row that rounds to the baseline's rate is trained once
    same = bracketing_grid(0.0125, 0.8, (1, 4, 16, 64), (0.1, 10.0), ("baseline", "threshold"),
                           baseline_learning_rate=0.5)
    assert same.cells == [(0.5, 4), (0.5, 16), (0.5, 64)]
    with pytest.raises(ValueError, match="baseline"):
        bracketing_grid(0.0125, 0.8, (1, 4), (0.1, 10.0), ("baseline", "threshold"))


def test_predicted_overshoot_of_the_step_response_from_rest():
    from pgrpo.fit.kref_sweep import predicted_overshoot

    # zeta = 0.5: exp(-pi 0.5 / sqrt(0.75)) = exp(-1.8138) = 0.16303 (the textbook 16.3%)
    assert predicted_overshoot(0.5) == pytest.approx(0.16303, abs=1e-5)
    assert predicted_overshoot(1.2) == 0.0 and predicted_overshoot(-0.1) == 1.0
    assert math.isnan(predicted_overshoot(float("nan")))
    rng = np.random.default_rng(2)
    t = STEPS - 1.0
    regime = classify_run(_run(0.7 - 0.5 * np.exp(-t / 30) + rng.normal(0, 0.02, STEPS.size), eta=0.02, k_ref=1,
                               mu=0.8), K=0.5, smoothing=5)
    # K eta = 0.01: zeta = 0.19 / sqrt(0.02 x 1.81) = 0.9987, an overshoot of exp(-pi 0.9987 / 0.0510) ~ 1e-27
    assert regime.predicted == "oscillatory" and regime.predicted_overshoot < 1e-20
    assert regime.overshoot_resolvable is False and regime.as_dict()["overshoot_resolvable"] is False


def test_min_generations_lengthens_the_runs_that_refresh_rarely():
    from pgrpo.stages.kref_sweep import arm_sweep_section, sweep_training

    sweep = {"min_generations": 8, "training": {"max_steps": 128},
             "arms": {"sgd": {"baseline": {"learning_rate": 0.3}}}}
    section = arm_sweep_section(sweep, "sgd")
    assert section["min_generations"] == 8 and "min_generations" not in arm_sweep_section(sweep, "sgd", baseline=True)
    assert sweep_training({"max_steps": 300}, section, 0.3, 32)["max_steps"] == 256  # 8 generations x 32
    assert sweep_training({"max_steps": 300}, section, 0.3, 4)["max_steps"] == 128  # 8 x 4 < 128
    assert sweep_training({"max_steps": 300}, {"training": {"max_steps": 128}}, 0.3, 32)["max_steps"] == 128
