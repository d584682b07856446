"""The finite-G stage (``pgrpo bandit finite-g``): a small grid end to end, and its config errors."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from pgrpo.errors import InputError
from pgrpo.stages.bandit import run_finite_g

SMALL = {"finite_g": {"group_sizes": [2, 8, 32], "replicas": 200, "steps": 600, "burn_in": 300}}


def test_small_grid_writes_every_output(tmp_path):
    calibration = tmp_path / "calibration.json"
    calibration.write_text(json.dumps({"stiffness": 0.1228, "p_star": 1.35, "p_ref": 0.4165, "beta": 1.0,
                                       "rewards": [0, 0, 0, 0, 0, 0, 1.666, 1.666]}))
    out = {k: str(tmp_path / f"finite_g.{k}") for k in ("md", "csv", "png", "pdf")}
    report = run_finite_g(SMALL, str(calibration), out["md"], out["csv"], out["png"], out["pdf"])
    table = pd.read_csv(out["csv"])
    assert list(table["G"]) == [2, 8, 32]
    # the zero-spread fraction of a group of G draws falls with G (two reward levels: P = p^G + (1 - p)^G)
    assert table["zero_spread"].is_monotonic_decreasing
    text = (tmp_path / "finite_g.md").read_text()
    assert "Exponent of Var(p) about its own mean" in text and "## Verdicts" in text
    assert len(report.verdicts) >= 5 and all(v.verdict in ("reproduced", "partly", "not") for v in report.verdicts)
    assert (tmp_path / "finite_g.png").stat().st_size > 0


def test_unknown_finite_g_key_is_named(tmp_path):
    calibration = tmp_path / "calibration.json"
    calibration.write_text(json.dumps({"stiffness": 0.1228}))
    with pytest.raises(InputError, match="bandit.finite_g.replica"):
        run_finite_g({"finite_g": {"replica": 10}}, str(calibration), *(str(tmp_path / f"x.{e}") for e in
                                                                         ("md", "csv", "png", "pdf")))
