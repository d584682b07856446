"""What ``pgrpo diagnose`` reads and writes (pgrpo.stages.diagnose, pgrpo.diagnose.benchmark): the CLI's out folder
(verdicts, summaries, figures) and its one-line errors on bad logs, every saved log format giving the same verdicts
(also logged every k steps, or without KL and entropy), the workflow's diagnostics gaining the seven modes, run curves
of a hand-made frame diagnosed directly, and the diagnose benchmark's scoring by hand."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pgrpo.cli import main
from pgrpo.diagnose.modes.record import MODES
from pgrpo.diagnose.records import RunCurves
from pgrpo.diagnose.settings import diagnostics_config
from pgrpo.errors import InputError
from pgrpo.stages.diagnose import run_diagnostics
from tests import _modes_helpers
from tests._modes_helpers import CASES, diagnose, write_log

planted_reports = _modes_helpers.planted_reports  # the module-scoped fixture (a fixture is found by its name here)


# ---------------------------------------------------------------------------------------------- CLI and outputs


def test_cli_out_dir_writes_verdicts_summary_and_figures(tmp_path, capsys):
    case = CASES["planted_regression_at_cap"]
    log = write_log(tmp_path, "regression", case["log_history"])
    out = tmp_path / "out"
    status = main(["diagnose", str(log), "--out", str(out), "--max-completion-length", "512", "--fail-on-flag"])
    assert status == 1  # regression and truncation flagged
    printed = capsys.readouterr().out
    assert printed.startswith("# Diagnosis of") and "| regression | **yes** |" in printed
    data = json.loads((out / "verdicts.json").read_text())
    assert data["summary"]["healthy"] is False and set(data["summary"]["flagged"]) == {"regression", "truncation"}
    assert data["modes"]["truncation"]["thresholds"]["max_completion_length"] == 512
    for name in ("summary.md", "summary.html", "modes.png", "modes.pdf", "figure2.png", "figure5.pdf"):
        assert (out / name).stat().st_size > 200, name
    html = (out / "summary.html").read_text()
    assert "<table" in html and 'src="modes.png"' in html
    assert main(["diagnose", str(log), "--json", str(tmp_path / "d.json"), "--md", str(tmp_path / "d.md"),
                 "--rules", "toolkit"]) == 0
    assert json.loads((tmp_path / "d.json").read_text())["rule_set"] == "toolkit"
    assert "| truncation | n/a |" in (tmp_path / "d.md").read_text()


@pytest.mark.parametrize("content, needle", [
    ('{"best_metric": null}', "neither a TRL trainer_state.json"),
    ('{"log_history": []}', "empty"),
    ('[{"step": 1, "reward": NaN}, {"step": 2, "reward": 0.2}]', "NaN or infinite"),
    ('[{"step": 1, "reward": 0.1}, {"step": 1, "reward": 0.1}]', "step 1 is logged twice"),
    ('[{"step": 2, "reward": 0.1}, {"step": 1, "reward": 0.2}]', "steps go backwards"),
    ("not json at all", "not valid JSON"),
])
def test_cli_bad_logs_exit_2_with_one_line(tmp_path, capsys, content, needle):
    path = tmp_path / "log.json"
    path.write_text(content)
    assert main(["diagnose", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err and err.startswith("pgrpo diagnose: error:")


# ------------------------------------------------------------------------------------- every saved format, alike


def _formats(tmp_path: Path) -> dict[str, Path]:
    """One run saved in every format a practitioner has (``CASES['planted_healthy_with_eval']``)."""
    history = CASES["planted_healthy_with_eval"]["log_history"]
    paths = {"trainer_state": tmp_path / "run" / "trainer_state.json"}
    paths["trainer_state"].parent.mkdir()
    paths["trainer_state"].write_text(json.dumps({"global_step": 300, "log_history": history}))
    paths["bare_list"] = tmp_path / "history.json"
    paths["bare_list"].write_text(json.dumps(history))
    folder = tmp_path / "output"
    for n in (100, 300):
        (folder / f"checkpoint-{n}").mkdir(parents=True)
        kept = [e for e in history if e["step"] <= n]
        (folder / f"checkpoint-{n}" / "trainer_state.json").write_text(json.dumps({"log_history": kept}))
    paths["output_folder"] = folder
    frame = pd.DataFrame(history).groupby("step").first().reset_index()
    wandb = frame.rename(columns={c: (f"run - eval/{c[5:]}" if c.startswith("eval_") else f"run - train/{c}")
                                  for c in frame.columns if c != "step"}).rename(columns={"step": "Step"})
    paths["wandb_csv"] = tmp_path / "wandb.csv"
    wandb.to_csv(paths["wandb_csv"], index=False)
    old = [{("completion_length" if k == "completions/mean_length" else
             "rewards/correct" if k == "rewards/correct/mean" else k): v for k, v in e.items()
            if k not in ("reward", "rewards/correct/std")} for e in history]
    paths["old_trl_names"] = tmp_path / "old.json"
    paths["old_trl_names"].write_text(json.dumps({"log_history": old}))
    return paths


def test_every_saved_format_gives_the_same_verdicts(tmp_path):
    verdicts = {}
    for name, path in _formats(tmp_path).items():
        data = diagnose(path, {"max_completion_length": 1024}).to_dict()
        verdicts[name] = {m: v["flagged"] for m, v in data["modes"].items()}
        assert data["n_steps"] == 300, name
    reference = verdicts["trainer_state"]
    assert reference == {m: False for m in MODES}
    for name, got in verdicts.items():
        assert got == reference, name


def test_logs_every_k_steps_and_without_kl_or_entropy(planted_reports, tmp_path):
    every5 = planted_reports["planted_healthy_every5_no_kl"].to_dict()
    assert every5["n_steps"] == 80 and every5["summary"]["healthy"]
    history = [{k: v for k, v in e.items() if k not in ("entropy", "kl")} for e in CASES["planted_healthy"]["log_history"]]
    data = diagnose(write_log(tmp_path, "bare", history)).to_dict()
    assert data["modes"]["concentration"]["flagged"] is None and "entropy" in data["modes"]["concentration"]["reason"]
    assert data["modes"]["instability"]["flagged"] is False  # grad_norm alone
    assert data["summary"]["healthy"] is True and "concentration" in data["summary"]["not_checked"]


def test_workflow_diagnostics_gain_the_modes(tmp_path):
    case = CASES["planted_healthy"]
    frame = pd.DataFrame(case["log_history"])
    out = {"step": frame["step"]}
    for column in frame.columns:
        if column != "step":
            out[f"{column}_mean"], out[f"{column}_sd"], out[f"{column}_n"] = frame[column], 0.01, 2
    path = tmp_path / "aggregate" / "tiny" / "G8.csv"
    path.parent.mkdir(parents=True)
    pd.DataFrame(out).to_csv(path, index=False)
    report = run_diagnostics([str(path)], str(tmp_path / "v.json"), str(tmp_path / "v.md"))
    data = json.loads((tmp_path / "v.json").read_text())
    assert data["modes"][0]["model"] == "tiny" and data["modes"][0]["G"] == 8
    assert set(data["modes"][0]["modes"]) == set(MODES)
    assert report.verdicts[0].summary()["healthy"] is True
    markdown = (tmp_path / "v.md").read_text()
    assert "**Failure modes**" in markdown and markdown.count("## ") == 5


def test_run_curves_of_a_hand_frame_can_be_diagnosed_directly():
    from pgrpo.diagnose.readouts.report import diagnose_curves

    steps = np.arange(1, 61)
    frame = pd.DataFrame({"step": steps, "reward": 0.5 + 0 * steps})
    report = diagnose_curves(RunCurves("m", None, frame, "hand"), diagnostics_config(None))
    assert report.verdicts.modes["no_learning"].flagged is True


# --- the diagnose benchmark (pgrpo diagnose-benchmark, rule diagnose_benchmark) ------------------------------------


def test_benchmark_scoring_by_hand():
    """Two logs, one mode each way: a found failure with its onset 12 steps off (tolerance max(10% of 100, 2 x 1) =
    10: not ok), a false flag, a miss and a correct negative; an unknown label is not scored."""
    from pgrpo.diagnose.benchmark import counts, onset_tolerance, rows_for

    report = {"first_step": 0, "last_step": 100, "n_steps": 101}
    assert onset_tolerance(report) == pytest.approx(10.0)

    def reports(flags):
        modes = {m: {"flagged": flags.get(m, False), "onset_step": 42 if flags.get(m) else None,
                     "verdict": "flagged" if flags.get(m) else "not flagged"} for m in MODES}
        return {"ours": {**report, "modes": modes}, "toolkit": {**report, "modes": modes}}

    def labels(yes, unknown=()):
        return {m: {"label": None if m in unknown else m in yes, "onset_step": 30 if m in yes else None,
                    "reason": ""} for m in MODES}

    rows = (rows_for("a", "dev", labels({"hacking", "regression"}, unknown={"truncation"}),
                     reports({"hacking": True, "degeneracy": True, "truncation": True}))
            + rows_for("b", "dev", labels(set()), reports({})))
    c = counts(rows, "ours")
    n_known = 2 * len(MODES) - 1
    assert (c["tp"], c["fp"], c["fn"]) == (1, 1, 1) and c["tn"] == n_known - 3
    assert (c["onset_ok"], c["onset_n"]) == (0, 1)  # |42 - 30| = 12 > 10


def test_benchmark_counts_the_blind_batch_apart_across_splits():
    """The blind batch's records count its logs whatever their split: here one dev log and one holdout log of
    three, so its counts are the sum of those two logs' and its logs 2 (by hand: the flags below)."""
    from pgrpo.diagnose.benchmark import BLIND, rows_for, summary_records

    report = {"first_step": 0, "last_step": 100, "n_steps": 101}

    def reports(flagged):
        modes = {m: {"flagged": m == flagged, "onset_step": 40 if m == flagged else None,
                     "verdict": "flagged" if m == flagged else "not flagged"} for m in MODES}
        return {"ours": {**report, "modes": modes}, "toolkit": {**report, "modes": modes}}

    def labels(yes):
        return {m: {"label": m == yes, "onset_step": 40 if m == yes else None, "reason": ""} for m in MODES}

    rows = (rows_for("a", "dev", labels("hacking"), reports("hacking"), blind=True)  # found
            + rows_for("b", "dev", labels("hacking"), reports(None))  # missed, not blind
            + rows_for("c", "holdout", labels(None), reports("degeneracy"), blind=True))  # a false flag
    by = {(r["split"], r["rule_set"], r["mode"]): r for r in summary_records(rows)}
    blind = by[(BLIND, "ours", "all")]
    assert blind["logs"] == 2 and (blind["tp"], blind["fn"], blind["fp"]) == (1, 0, 1)
    assert (by[("dev", "ours", "all")]["tp"], by[("dev", "ours", "all")]["fn"]) == (1, 1)
    assert by[("holdout", "ours", "all")]["logs"] == 1


def test_benchmark_refuses_a_label_file_naming_a_missing_log(tmp_path):
    from pgrpo.stages.diagnose_benchmark import run_diagnose_benchmark

    (tmp_path / "labels.json").write_text(json.dumps({"absent.json": {"split": "dev"}}))
    with pytest.raises(InputError, match="absent.json"):
        run_diagnose_benchmark(str(tmp_path / "out"), str(tmp_path))
    assert not (tmp_path / "out").exists()  # nothing written before the input is checked
