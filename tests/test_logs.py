"""Every saved log format a GRPO user has, read by :func:`pgrpo.stages.logs.read_run_log` (hand-written logs)."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from pgrpo.errors import InputError
from pgrpo.stages.logs import read_run_log, resolve_log_path

HISTORY = [
    {"step": 1, "loss": 0.1, "reward": 0.2, "reward_std": 0.3, "kl": 0.0, "grad_norm": 1.5, "epoch": 0.1},
    {"step": 2, "loss": 0.1, "reward": 0.4, "reward_std": 0.3, "kl": 0.01, "grad_norm": 1.2, "epoch": 0.2},
    {"step": 2, "eval_reward": 0.35, "eval_loss": 0.2, "epoch": 0.2},
    {"step": 3, "loss": 0.1, "reward": 0.5, "reward_std": 0.2, "kl": 0.02, "grad_norm": 1.1, "epoch": 0.3},
]


def _check_history_frame(frame):
    assert list(frame["step"]) == [1, 2, 3]
    assert list(frame["reward"]) == [0.2, 0.4, 0.5]
    assert frame.loc[frame["step"] == 2, "eval_reward"].item() == 0.35  # the eval row merged into its step
    assert math.isnan(frame.loc[frame["step"] == 1, "eval_reward"].item())


def test_trainer_state_json(tmp_path):
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps({"global_step": 3, "log_history": HISTORY}))
    _check_history_frame(read_run_log(path))


def test_bare_log_history_list(tmp_path):
    path = tmp_path / "history.json"
    path.write_text(json.dumps(HISTORY))
    _check_history_frame(read_run_log(path))


def test_output_folder_uses_the_latest_checkpoint(tmp_path):
    for n, history in ((2, HISTORY[:2]), (10, HISTORY), (9, HISTORY[:1])):
        folder = tmp_path / f"checkpoint-{n}"
        folder.mkdir()
        (folder / "trainer_state.json").write_text(json.dumps({"log_history": history}))
    assert resolve_log_path(tmp_path) == tmp_path / "checkpoint-10" / "trainer_state.json"
    _check_history_frame(read_run_log(tmp_path))


def test_wandb_export_csv(tmp_path):
    frame = pd.DataFrame({"Step": [1, 2, 3], "run-a - train/reward": [0.2, 0.4, 0.5],
                          "run-a - train/reward__MIN": [0.1, 0.3, 0.4], "run-a - train/reward__MAX": [0.3, 0.5, 0.6],
                          "run-a - eval/reward": [None, 0.35, None]})
    frame.to_csv(tmp_path / "export.csv", index=False)
    out = read_run_log(tmp_path / "export.csv")
    assert list(out.columns) == ["step", "reward", "eval_reward"]
    _check_history_frame(out)


def test_old_trl_names_and_several_reward_functions(tmp_path):
    history = [{"step": s, "rewards/format": f, "rewards/accuracy": a, "completion_length": n}
               for s, f, a, n in ((1, 0.5, 0.1, 100.0), (2, 1.0, 0.3, 120.0))]
    path = tmp_path / "state.json"
    path.write_text(json.dumps({"log_history": history}))
    out = read_run_log(path)
    assert list(out["rewards/accuracy/mean"]) == [0.1, 0.3]
    assert list(out["completions/mean_length"]) == [100.0, 120.0]
    assert out["reward"].tolist() == pytest.approx([0.6, 1.3])  # the total reward = sum of the functions


@pytest.mark.parametrize("content, needle", [
    ({"log_history": []}, "empty"),
    ({"best_metric": None, "epoch": 1.0}, "neither a TRL trainer_state.json"),
    ([{"step": 1, "reward": 0.1}, {"step": 1, "reward": 0.2}], "step 1 is logged twice"),
    ([{"step": 1, "reward": 0.1}, {"step": 1, "reward": 0.1}], "step 1 is logged twice"),
    ([{"step": 1, "reward": 0.1}, {"step": None, "reward": 0.2}], "row 2 has values but no step"),
    ([{"step": 2, "reward": 0.1}, {"step": 1, "reward": 0.2}], "steps go backwards"),
    ([{"reward": 0.1}], "no step column"),
])
def test_bad_logs_give_one_line(tmp_path, content, needle):
    path = tmp_path / "log.json"
    path.write_text(json.dumps(content))
    with pytest.raises(InputError) as error:
        read_run_log(path)
    assert needle in str(error.value) and "\n" not in str(error.value)


def test_not_json_and_missing(tmp_path):
    path = tmp_path / "x.json"
    path.write_text("{not json")
    with pytest.raises(InputError, match="not valid JSON"):
        read_run_log(path)
    with pytest.raises(InputError, match="not found"):
        read_run_log(tmp_path / "absent.csv")
    with pytest.raises(InputError, match="has no trainer_state.json"):
        read_run_log(tmp_path)


def test_eval_and_summary_rows_may_repeat_the_epoch_of_their_step(tmp_path):
    history = HISTORY + [{"step": 3, "epoch": 0.3, "train_runtime": 1.0, "train_loss": 0.1}]
    path = tmp_path / "state.json"
    path.write_text(json.dumps({"log_history": history}))
    assert list(read_run_log(path)["step"]) == [1, 2, 3]


def test_nan_and_infinite_values_are_refused_unless_allowed(tmp_path):
    path = tmp_path / "state.json"
    path.write_text(json.dumps({"log_history": [dict(e) for e in HISTORY[:2]] +
                                [{"step": 3, "reward": float("nan"), "grad_norm": float("inf")}]}))
    with pytest.raises(InputError, match=r"'reward' is NaN or infinite at step 3 \(2 non-finite value"):
        read_run_log(path)
    frame = read_run_log(path, allow_non_finite=True)
    assert frame.attrs["non_finite"] == {"reward": [3.0], "grad_norm": [3.0]}
    assert math.isnan(frame.loc[frame["step"] == 3, "grad_norm"].item())
    csv = tmp_path / "log.csv"
    csv.write_text("step,train/reward,eval/reward\n1,0.1,\n2,nan,0.3\n")  # an empty cell is missing, 'nan' is not
    with pytest.raises(InputError, match="'reward' is NaN or infinite at step 2"):
        read_run_log(csv)
    assert read_run_log(csv, allow_non_finite=True).attrs["non_finite"] == {"reward": [2.0]}


def _two_run_export(path):
    # a W&B panel export: one column per run and key, the panel's min/max band columns, a key only one run logs
    pd.DataFrame({"Step": [1, 2, 3], "lr1e-6 - train/reward": [0.1, 0.2, 0.3],
                  "lr1e-6 - train/reward__MIN": [0.1, 0.2, 0.3], "lr1e-6 - train/reward__MAX": [0.1, 0.2, 0.3],
                  "lr3e-6 - train/reward": [0.5, 0.6, 0.7], "lr3e-6 - train/kl": [0.01, 0.02, 0.03]}).to_csv(
        path, index=False)
    return path


def test_a_w_and_b_export_of_several_runs_names_them_instead_of_mixing_their_columns(tmp_path):
    from pgrpo.stages.logs import log_runs, run_source

    path = _two_run_export(tmp_path / "panel.csv")
    with pytest.raises(InputError, match=r"W&B export of 2 runs \(lr1e-6, lr3e-6\).*panel.csv::lr1e-6"):
        read_run_log(path)
    first = read_run_log(f"{path}::lr1e-6")
    assert list(first["reward"]) == [0.1, 0.2, 0.3] and "kl" not in first.columns  # nothing of the other run
    second = read_run_log(f"{path}::lr3e-6")
    assert list(second["reward"]) == [0.5, 0.6, 0.7] and list(second["kl"]) == [0.01, 0.02, 0.03]
    with pytest.raises(InputError, match=r"no W&B run 'lr9' \(its runs: lr1e-6, lr3e-6\)"):
        read_run_log(f"{path}::lr9")
    assert log_runs(path) == [f"{path}::lr1e-6", f"{path}::lr3e-6"]
    assert resolve_log_path(f"{path}::lr3e-6") == path and run_source(f"{path}::lr3e-6") == f"{path}::lr3e-6"
    single = tmp_path / "one.csv"
    pd.DataFrame({"Step": [1, 2], "run-a - train/reward": [0.1, 0.2]}).to_csv(single, index=False)
    assert log_runs(single) == [str(single)] and list(read_run_log(single)["reward"]) == [0.1, 0.2]
    state = tmp_path / "trainer_state.json"
    state.write_text(json.dumps({"log_history": HISTORY}))
    assert log_runs(state) == [str(state)]
    with pytest.raises(InputError, match="names a run of a W&B export"):
        read_run_log(f"{state}::x")


def test_diagnose_and_compare_read_a_run_of_a_w_and_b_export(tmp_path, capsys):
    from pgrpo.cli import main
    from pgrpo.stages.diagnose import read_log

    path = _two_run_export(tmp_path / "panel.csv")
    curves = read_log(f"{path}::lr3e-6")
    assert curves.model == "lr3e-6" and list(curves.series("reward")[1]) == [0.5, 0.6, 0.7]
    assert main(["diagnose", str(path)]) == 2
    assert "W&B export of 2 runs" in capsys.readouterr().err


# ---- a run resumed from a checkpoint into the same log -------------------------------------------------------------


def _resumed_history() -> list[dict]:
    """Steps 1-12 logged, the process killed, the run resumed from checkpoint-8: steps 9-14 logged again with other
    values (the rows of steps 9-12 logged before the resume were lost with their process); an eval row at step 10
    before the resume and one after it."""
    before = [{"step": s, "reward": 0.1 * s} for s in range(1, 13)] + [{"step": 10, "eval_reward": 0.5}]
    after = [{"step": s, "reward": 0.1 * s + 0.05} for s in range(9, 15)] + [{"step": 10, "eval_reward": 0.7}]
    before.sort(key=lambda e: e["step"])
    after.sort(key=lambda e: e["step"])
    return before + after


def test_a_resumed_run_keeps_the_rows_logged_after_the_resume(tmp_path, capsys):
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps({"log_history": _resumed_history()}))
    out = read_run_log(path)
    assert out["step"].tolist() == list(range(1, 15))
    expected = [0.1 * s for s in range(1, 9)] + [0.1 * s + 0.05 for s in range(9, 15)]
    assert out["reward"].tolist() == pytest.approx(expected)
    assert out.loc[out["step"] == 10, "eval_reward"].tolist() == [0.7]  # the eval after the resume
    assert out.attrs["resumes"] == [{"step": 9, "superseded": 5, "last_superseded": 12}]
    note = capsys.readouterr().err
    assert "resumed from a checkpoint at step 9 (5 row(s) logged at steps 9 to 12" in note
    read_run_log(path)
    assert capsys.readouterr().err == ""  # told once per process (a watch re-reads its log every minute)


def test_two_resumes_in_a_csv_and_the_cases_that_are_not_resumes(tmp_path):
    rows = ([(s, 1.0) for s in range(1, 31)] + [(s, 2.0) for s in range(25, 61)] + [(s, 3.0) for s in range(55, 81)])
    path = tmp_path / "log.csv"
    pd.DataFrame(rows, columns=["train/global_step", "train/reward"]).to_csv(path, index=False)
    out = read_run_log(path)
    assert out["step"].tolist() == list(range(1, 81))
    assert out["reward"].tolist() == [1.0] * 24 + [2.0] * 30 + [3.0] * 26
    assert out.attrs["resumes"] == [{"step": 25, "superseded": 6, "last_superseded": 30},
                                    {"step": 55, "superseded": 6, "last_superseded": 60}]
    # back to the first step: a second run, not a resume
    restart = [{"step": s, "reward": 0.1} for s in (1, 2, 3)] + [{"step": s, "reward": 0.2} for s in (1, 2)]
    # out of order row by row (each go-back alone would read as a resume, but three in six rows): neither
    shuffled = [{"step": s, "reward": 0.1} for s in (1, 5, 3, 9, 4, 2)]
    for history in (restart, shuffled):
        path = tmp_path / "bad.json"
        path.write_text(json.dumps(history))
        with pytest.raises(InputError, match="steps go backwards .* is it two runs in one file"):
            read_run_log(path)
