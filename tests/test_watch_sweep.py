"""`pgrpo watch PATH PATH ...`: a sweep watched, each run as `pgrpo watch PATH` watches one, the runs ranked after
every round as `pgrpo forecast --compare` ranks them (planted runs whose plateaus are known)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from pgrpo.cli import main
from pgrpo.errors import InputError
from pgrpo.stages.watch_sweep import run_watch_sweep, sweep_folder, sweep_runs

#: three runs of a sweep, cut at step 100 of the 400 they plan: their plateaus (the three-phase law's R_inf)
PLATEAUS = {"lr_a": 0.8, "lr_b": 0.7, "lr_c": 0.25}


def _sweep(root, plateaus=PLATEAUS, logged=100, planned=400):
    paths = []
    for i, (name, rinf) in enumerate(plateaus.items()):
        rng = np.random.default_rng(i)
        t = np.arange(1, logged + 1)
        y = rinf - (rinf - 0.1) * (1 + 0.03 * t) * np.exp(-0.03 * t) + rng.normal(0, 0.03, t.size)
        folder = root / name
        folder.mkdir(parents=True)
        history = [{"step": int(s), "reward": float(v), "reward_std": 0.2, "frac_reward_zero_std": 0.1}
                   for s, v in zip(t, y)]
        (folder / "trainer_state.json").write_text(json.dumps({"global_step": logged, "max_steps": planned,
                                                                "log_history": history}))
        paths.append(str(folder))
    return paths


def test_a_sweep_is_watched_run_by_run_and_ranked_to_the_planned_length(tmp_path):
    paths = _sweep(tmp_path / "runs")
    outcomes = run_watch_sweep(paths, once=True, out_dir=str(tmp_path / "sw"))
    assert [o.ended for o in outcomes] == ["once"] * 3 and all(len(o.reads) == 1 for o in outcomes)
    for name in PLATEAUS:  # each run's own live.json, as a single watch writes it
        live = json.loads((tmp_path / "sw" / name / "live.json").read_text())
        assert live["live"]["step"] == 100
    ranking = json.loads((tmp_path / "sw" / "sweep.json").read_text())
    assert ranking["horizon"] == 400  # the runs' planned length (trainer_state's max_steps), not their last step
    assert [r["log"] for r in ranking["runs"]] == paths  # the planted order of the plateaus
    # the leader's level now is its law at step 100, 0.8 - 0.7 * 4 e^-3 = 0.66: the run planted at 0.25 cannot beat
    # it (the stop rule names it), the one planted at 0.7 can
    assert [r["stop_now"] for r in ranking["runs"]] == [False, False, True]
    assert (tmp_path / "sw" / "sweep.png").read_bytes()[:4] == b"\x89PNG"


def test_pgrpo_watch_of_several_runs_prints_each_run_s_line_and_the_ranking(tmp_path, capsys):
    paths = _sweep(tmp_path / "runs")
    assert main(["watch", *paths, "--once"]) == 0
    out = capsys.readouterr().out
    assert all(f"[{name}] step 100:" in out for name in PLATEAUS)
    assert "sweep: leader lr_a" in out and "the stop rule would stop lr_c" in out
    folder = tmp_path / "runs" / "pgrpo-sweep"  # beside the runs when no --out is given
    assert sweep_folder(paths, None) == folder.resolve() and (folder / "sweep.json").is_file()
    assert (tmp_path / "runs" / "lr_a" / "pgrpo" / "live.json").is_file()  # each run's beside its log


def test_a_w_and_b_export_of_several_runs_is_a_sweep(tmp_path, capsys):
    t = np.arange(1, 101)
    frame = {"Step": t}
    for name, rinf in (("run-high", 0.8), ("run-low", 0.3)):
        frame[f"{name} - train/reward"] = rinf - (rinf - 0.1) * np.exp(-t / 30)
    pd.DataFrame(frame).to_csv(tmp_path / "panel.csv", index=False)
    runs = sweep_runs([str(tmp_path / "panel.csv")])
    assert runs == [f"{tmp_path / 'panel.csv'}::run-high", f"{tmp_path / 'panel.csv'}::run-low"]
    assert main(["watch", str(tmp_path / "panel.csv"), "--once", "--total-steps", "300",
                 "--out", str(tmp_path / "sw")]) == 0
    assert "[run-high] step 100" in capsys.readouterr().out
    assert (tmp_path / "sw" / "run-low" / "live.json").is_file()


def test_a_sweep_s_bad_input_is_refused_before_any_read(tmp_path, capsys):
    paths = _sweep(tmp_path / "runs")
    assert main(["watch", *paths, "--once", "--stop-threshold", "2"]) == 2
    assert "--stop-threshold must be a probability" in capsys.readouterr().err
    assert main(["watch", *paths, "--once", "--meta", str(tmp_path / "meta.json")]) == 2
    assert "--meta applies to one run" in capsys.readouterr().err
    with pytest.raises(InputError, match="named twice"):
        sweep_runs([paths[0], paths[0]])
    assert not (tmp_path / "runs" / "pgrpo-sweep").exists()


def test_a_watch_started_before_its_run_writes_waits_for_it(tmp_path, capsys):
    # a job script starts the watcher beside the training: the output folder does not exist yet
    assert main(["watch", str(tmp_path / "out"), "--every", "0.01", "--idle-timeout", "0.05"]) == 0
    assert "log not found" in capsys.readouterr().err  # a warning per read, then the idle timeout: no error exit
    paths = _sweep(tmp_path / "runs")
    assert sweep_runs([*paths, str(tmp_path / "runs" / "lr_d")]) == [*paths, str(tmp_path / "runs" / "lr_d")]
    assert sweep_folder([*paths, str(tmp_path / "runs" / "lr_d")], None) == (tmp_path / "runs" / "pgrpo-sweep").resolve()
