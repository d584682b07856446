"""Figure 1 and the forecast figure (pgrpo.plots), built from synthetic seed logs through aggregate and fit."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pgrpo.errors import InputError
from pgrpo.figures.fits import figure1
from pgrpo.figures.style import label_panel
from pgrpo.fit.laws import LAWS, THREE_PHASE
from pgrpo.fit.least_squares import FitResult
from pgrpo.stages.aggregate import run_aggregate
from pgrpo.stages.fit import run_figure1, run_fit, run_forecast

STEPS = np.arange(1, 301)


def write_seed_log(root: Path, model: str, G: int, seed: int, with_eval: bool = True) -> str:
    """A log.csv in the contract's layout from the three-phase law plus binomial noise (G x 8 completions)."""
    rng = np.random.default_rng(zlib.crc32(f"{model}/{G}/{seed}".encode()))
    p = LAWS[THREE_PHASE].curve(STEPS.astype(float), {"R0": 0.1, "R_inf": 0.7, "omega_n": 0.02})
    frame = pd.DataFrame({"step": STEPS, "reward": rng.binomial(8 * G, p) / (8 * G), "reward_std": 0.4,
                          "frac_reward_zero_std": 0.1, "entropy": 1.0, "kl": 0.01, "grad_norm": 0.5,
                          "importance_sampling_ratio_max": 1.05})
    if with_eval:
        on = STEPS % 25 == 0
        frame["eval_reward"] = np.where(on, rng.binomial(64, p) / 64, np.nan)
        frame["eval_accuracy"] = np.where(on, rng.binomial(64, 0.9 * p) / 64, np.nan)
    run_dir = root / "train" / model / f"G{G}" / f"seed{seed}"
    run_dir.mkdir(parents=True, exist_ok=True)
    frame.to_csv(run_dir / "log.csv", index=False)
    (run_dir / "meta.json").write_text(json.dumps({"model": model, "G": G, "seed": seed, "eta": 1e-5, "mu": 0.9,
                                                   "k_ref": 1, "max_steps": int(STEPS[-1])}))
    return str(run_dir / "log.csv")


def build_stage_outputs(root: Path, models: list[str], with_eval: bool = True) -> tuple[list[str], list[str]]:
    aggregates, fits = [], []
    for model in models:
        model_aggs, metas = [], []
        for G in (4, 16):
            logs = [write_seed_log(root, model, G, seed, with_eval) for seed in (42, 3407)]
            metas += [str(Path(log).parent / "meta.json") for log in logs]
            out = root / "aggregate" / model / f"G{G}.csv"
            run_aggregate(logs, str(out))
            model_aggs.append(str(out))
        fit_dir = root / "fit" / model
        run_fit(model_aggs, str(fit_dir / "fit.json"), str(fit_dir / "fit.csv"), str(fit_dir / "fit.md"),
                meta_jsons=metas)
        aggregates += model_aggs
        fits.append(str(fit_dir / "fit.json"))
    return aggregates, fits


def panel_texts(ax) -> list[str]:
    return [text.get_text() for text in ax.texts]


def test_figure1_default_grid_one_model_two_group_sizes(tmp_path):
    aggregates, fits = build_stage_outputs(tmp_path, ["tiny"])
    pdf, png = tmp_path / "figures" / "figure1.pdf", tmp_path / "figures" / "figure1.png"
    run_figure1(aggregates, fits, str(pdf), str(png))
    assert pdf.stat().st_size > 1000 and png.read_bytes()[:4] == b"\x89PNG"


def test_figure1_panels_show_the_fit_r2_and_paper_layout(tmp_path):
    models = ["nemotron", "deepseek-7b", "qwen-1.5b"]
    aggregates, fit_jsons = build_stage_outputs(tmp_path, models)
    frames = {m: {G: pd.read_csv(tmp_path / "aggregate" / m / f"G{G}.csv") for G in (4, 16)} for m in models}
    fits = {}
    for model, path in zip(models, fit_jsons):
        payload = json.loads(Path(path).read_text())
        fits[model] = {int(G): {c: (FitResult.from_dict(r["fits"][THREE_PHASE]), r["r2_seed_mean"][THREE_PHASE])
                                for c, r in g["columns"].items()} for G, g in payload["groups"].items()}
    fig = figure1(frames, fits)
    axes = np.array(fig.axes).reshape(6, 3)
    # columns are models, rows (train, eval, accuracy) x (G=4, G=16), letters row by row as in the paper
    assert [ax.get_title() for ax in axes[0]] == models
    assert axes[1, 0].get_ylabel() == "train reward\nG=16" and axes[4, 0].get_ylabel() == "eval accuracy\nG=4"
    assert "(a)" in panel_texts(axes[0, 0]) and "(r)" in panel_texts(axes[5, 2]) and "(o)" in panel_texts(axes[4, 2])
    for r, (column, G) in enumerate((c, G) for c in ("reward", "eval_reward", "eval_accuracy") for G in (4, 16)):
        for c, model in enumerate(models):
            r2 = fits[model][G][column][1]
            assert f"$R^2$ = {r2:.2f}" in panel_texts(axes[r, c])
            dotted = [line for line in axes[r, c].lines if line.get_linestyle() == ":"]
            assert len(dotted) == 1  # the three-phase fit
    # seed mean and its band: the train panel's solid line is the aggregate mean
    solid = [line for line in axes[0, 0].lines if line.get_linestyle() == "-"][0]
    np.testing.assert_allclose(solid.get_ydata(), frames[models[0]][4]["reward_mean"])
    assert len(axes[0, 0].collections) >= 1


def test_figure1_without_eval_columns_says_no_eval_data(tmp_path):
    aggregates, fits = build_stage_outputs(tmp_path, ["tiny"], with_eval=False)
    run_figure1(aggregates, fits, str(tmp_path / "f.pdf"), str(tmp_path / "f.png"))
    frames = {"tiny": {G: pd.read_csv(tmp_path / "aggregate" / "tiny" / f"G{G}.csv") for G in (4, 16)}}
    fig = figure1(frames, {})
    axes = np.array(fig.axes).reshape(6, 1)
    assert "no eval data" in panel_texts(axes[2, 0]) and "no eval data" in panel_texts(axes[5, 0])
    assert "no fit" in " ".join(panel_texts(axes[0, 0]))  # no fit JSON given: the panel says so


def test_figure1_names_a_bad_input(tmp_path):
    with pytest.raises(InputError, match="not found"):
        run_figure1([str(tmp_path / "aggregate" / "tiny" / "G4.csv")], [], str(tmp_path / "f.pdf"),
                    str(tmp_path / "f.png"))
    aggregates, _ = build_stage_outputs(tmp_path, ["tiny"])
    with pytest.raises(InputError, match="fit JSON not found"):
        run_figure1(aggregates, [str(tmp_path / "nope.json")], str(tmp_path / "f.pdf"), str(tmp_path / "f.png"))


def test_forecast_figure_is_written(tmp_path):
    log = write_seed_log(tmp_path, "tiny", 16, 42)
    png = tmp_path / "forecast.png"
    payload = run_forecast(log, str(tmp_path / "forecast.json"), meta_json=str(Path(log).parent / "meta.json"),
                           out_png=str(png))
    assert payload["success"] and png.read_bytes()[:4] == b"\x89PNG"


def test_panel_letters_continue_past_z():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    label_panel(ax, 0)
    label_panel(ax, 25)
    label_panel(ax, 26)
    assert [t.get_text() for t in ax.texts] == ["(a)", "(z)", "(aa)"]
    plt.close(fig)
