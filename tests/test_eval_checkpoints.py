"""The held-out evaluation as jobs of its own (issue 19, item 2: ``training.eval_mode: checkpoints``): the training
job saves the adapter at every evaluation step, one job per step evaluates it, and the joined ``log.csv`` is the
inline run's, eval columns included, for the same seeds on the CPU.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from pgrpo.errors import InputError
from pgrpo.grpo.eval_checkpoints import evaluates_in_jobs, evaluation_steps, join_evaluations
from pgrpo.grpo.training_config import resolve_training, validate_training


@pytest.mark.parametrize("eval_steps, total, on_start, expected", [
    (25, 100, False, [25, 50, 75, 100]),
    (25, 110, True, [0, 25, 50, 75, 100, 110]),  # the last step too, as transformers evaluates it
    (5, 24, False, [5, 10, 15, 20, 24]),
    (0, 100, True, []),
    (None, 100, False, []),
])
def test_the_evaluation_steps_are_transformers_steps(eval_steps, total, on_start, expected):
    assert evaluation_steps(eval_steps, total, on_start) == expected


def test_only_checkpoints_mode_with_an_eval_set_evaluates_in_jobs():
    assert evaluates_in_jobs({"eval_mode": "checkpoints", "eval_steps": 5}, True)
    assert not evaluates_in_jobs({"eval_mode": "checkpoints", "eval_steps": 0}, True)
    assert not evaluates_in_jobs({"eval_mode": "checkpoints", "eval_steps": 5}, False)
    assert not evaluates_in_jobs({"eval_mode": "inline", "eval_steps": 5}, True)
    assert not evaluates_in_jobs({"eval_steps": 5}, True)  # inline is the default


def test_a_bad_eval_mode_is_named():
    with pytest.raises(InputError, match="eval_mode"):
        validate_training(resolve_training({"eval_mode": "later"}), 4)
    with pytest.raises(InputError, match="eval_job_batch_size"):
        validate_training(resolve_training({"eval_job_batch_size": 0}), 4)


def test_the_join_puts_each_evaluation_at_its_step_and_refuses_a_missing_one():
    train = pd.DataFrame({"step": [1, 2, 3, 4], "reward": [0.1, 0.2, 0.3, 0.4], "eval_accuracy": [None] * 4})
    rows = [{"step": 0, "eval_accuracy": 0.25, "eval_reward": 0.25, "eval_completion_length": 3.0},
            {"step": 2, "eval_accuracy": 0.5, "eval_reward": 0.5, "eval_completion_length": 4.0},
            {"step": 4, "eval_accuracy": 0.75, "eval_reward": 0.75, "eval_completion_length": 5.0}]
    joined = join_evaluations(train, rows, [0, 2, 4]).set_index("step")
    assert list(joined.index) == [0, 1, 2, 3, 4]
    assert joined.loc[0, "eval_accuracy"] == 0.25 and pd.isna(joined.loc[0, "reward"])  # step 0: eval alone
    assert joined.loc[2, "eval_accuracy"] == 0.5 and joined.loc[2, "reward"] == 0.2
    assert pd.isna(joined.loc[3, "eval_accuracy"]) and joined.loc[4, "eval_completion_length"] == 5.0
    with pytest.raises(InputError, match=r"steps \[0, 2\] do not match"):
        join_evaluations(train, rows[:2], [0, 2, 4])


@pytest.mark.slow
def test_evaluation_jobs_give_the_inline_numbers_on_the_cpu(tmp_path):
    """Two real runs of the tiny fixture model with the same seeds: inline, and with eval_mode checkpoints followed
    by one evaluate-checkpoint per step and join-evaluations. The two log.csv are the same to the last digit."""
    pytest.importorskip("trl")
    from tests.test_multiprocess import build_fixture

    from pgrpo.stages.eval_checkpoints import run_evaluate_checkpoint, run_join_evaluations
    from pgrpo.stages.train import run_train

    model, data = build_fixture(tmp_path / "fixture")
    training = {"max_steps": 5, "eval_steps": 2, "eval_on_start": True, "checkpoint_steps": 2,
                "per_device_train_batch_size": 8, "gradient_accumulation_steps": 1, "max_completion_length": 6,
                "max_prompt_length": 16, "num_generations_eval": 4, "per_device_eval_batch_size": 8,
                "learning_rate": 5e-3, "merge_adapters": False,
                "lora": {"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": ["q_proj", "v_proj"]}}
    inline, jobs = tmp_path / "inline", tmp_path / "jobs"
    run_train(model=model, data=data, training=training, G=4, seed=3, out_dir=str(inline))
    in_jobs = {**training, "eval_mode": "checkpoints"}
    run_train(model=model, data=data, training=in_jobs, G=4, seed=3, out_dir=str(jobs))

    assert not (jobs / "log.csv").exists() and (jobs / "train_log.csv").is_file()
    steps = [0, 2, 4, 5]
    assert sorted(p.name for p in (jobs / "eval_adapters").iterdir()) == [f"step-{s}" for s in steps]
    assert json.loads((jobs / "meta.json").read_text())["eval_mode"] == "checkpoints"
    evals = []
    for step in steps:
        out = tmp_path / "evals" / f"step{step}.json"
        run_evaluate_checkpoint(model=model, data=data, training=in_jobs, G=4, seed=3, run_dir=str(jobs),
                                step=step, out_json=str(out))
        evals.append(str(out))
    run_join_evaluations(train_log=str(jobs / "train_log.csv"), eval_jsons=evals, training=in_jobs,
                         out_csv=str(jobs / "log.csv"))

    a, b = pd.read_csv(inline / "log.csv"), pd.read_csv(jobs / "log.csv")
    assert a.dropna(subset=["eval_accuracy"])["step"].tolist() == steps
    pd.testing.assert_frame_equal(b.drop(columns=["step_time"]), a.drop(columns=["step_time"]), check_exact=True)
