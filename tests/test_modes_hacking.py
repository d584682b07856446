"""Reward hacking among the failure modes of ``pgrpo diagnose`` (pgrpo.diagnose.modes,
pgrpo.diagnose.readouts.hacking): it needs a held-out curve, and without an eval column the gold reward function is
that curve (Figure 2 with the correctness function as the eval curve); a rise the gold term carries under a tenth of
is hacking; the gold function is declared, named once, or found by elimination where opted into; ``--gold-reward``
and ``LiveSettings(gold_reward=...)`` reach the setting."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from pgrpo.cli import main
from pgrpo.diagnose.readouts.hacking import gold_column
from pgrpo.diagnose.records import RunCurves
from pgrpo.diagnose.settings import RewardHackingConfig, diagnostics_config
from pgrpo.errors import InputError
from pgrpo.stages.diagnose import diagnose_log
from tests import _modes_helpers
from tests._modes_helpers import diagnose, write_log

planted_reports = _modes_helpers.planted_reports  # the module-scoped fixture (a fixture is found by its name here)


def test_hacking_needs_an_eval_curve(planted_reports):
    assert planted_reports["planted_healthy"].to_dict()["modes"]["hacking"]["flagged"] is None
    assert "held-out" in planted_reports["planted_healthy"].to_dict()["modes"]["hacking"]["reason"]
    assert planted_reports["planted_healthy_with_eval"].to_dict()["modes"]["hacking"]["flagged"] is False
    assert planted_reports["planted_hacking_eval_flat"].to_dict()["modes"]["hacking"]["flagged"] is True


def _staged_rows(n, fmt, correct, seed=0):
    """A reward of two TRL reward functions (``rewards/<fn>/mean``), each a batch mean of 32 Bernoulli draws of its
    mean curve, the reward their sum."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(1, n + 1):
        f = rng.binomial(32, fmt(s)) / 32
        c = rng.binomial(32, correct(s)) / 32
        rows.append({"step": s, "reward": f + c, "reward_std": 0.4, "frac_reward_zero_std": 0.1, "grad_norm": 1.0,
                     "rewards/strict_format_reward_func/mean": f, "rewards/correctness_reward_func/mean": c})
    return rows


def test_without_an_eval_column_the_gold_reward_function_is_the_held_out_curve(tmp_path):
    """Figure 2 with the correctness function as the eval curve: a rise carried by the format term while
    correctness stays at its floor is the hacking signature; a correctness term that rises with the format one
    is not (no deficit below the diagonal); a reward that never rose is not read as hacking."""
    rise = lambda s: 0.9 * (1 - np.exp(-s / 30))  # noqa: E731
    hacked = diagnose(write_log(tmp_path, "format_only", _staged_rows(200, rise, lambda s: 0.05))).to_dict()
    verdict = hacked["modes"]["hacking"]
    assert verdict["flagged"] is True
    assert verdict["numbers"]["eval_column"] == "rewards/correctness_reward_func/mean"
    assert "standing in for an eval column" in verdict["numbers"]["held_out"]
    learned = diagnose(write_log(tmp_path, "both_rise", _staged_rows(200, rise, lambda s: 0.05 + 0.6 * (
        1 - np.exp(-s / 30)), seed=1))).to_dict()["modes"]["hacking"]
    assert learned["flagged"] is not True and learned["numbers"]["deficit"] < 0.15
    flat = diagnose(write_log(tmp_path, "flat", _staged_rows(200, lambda s: 0.3, lambda s: 0.05, seed=2)))
    assert flat.to_dict()["modes"]["hacking"]["flagged"] is False
    assert "did not rise" in flat.to_dict()["modes"]["hacking"]["verdict"]


@pytest.mark.parametrize("gold_end, flagged_by_share", [(0.05, True), (0.25, False)])
def test_a_rise_the_gold_term_carries_under_a_tenth_of_is_hacking(tmp_path, gold_end, flagged_by_share):
    """The reward is the sum of its terms (TRL), so the gold term's share of the reward's rise is the ratio of the
    two linear trends: a format term rising 0 -> 1 over 100 steps beside a gold term rising 0 -> ``gold_end``
    (each with a +-0.01 wobble, the same on both, so that the noise is not 0) gives ``gold_end / (1 + gold_end)``:
    0.048 is under ``gold_share_min`` = 0.1, hacking; 0.2 is not."""
    rows = []
    for s in range(100):
        wobble = 0.01 * (-1) ** s
        f, c = s / 99 + wobble, gold_end * s / 99 + wobble
        rows.append({"step": s + 1, "reward": f + c, "rewards/format_reward/mean": f,
                     "rewards/correctness_reward_func/mean": c})
    verdict = diagnose(write_log(tmp_path, f"share_{gold_end}", rows)).to_dict()["modes"]["hacking"]
    share = verdict["numbers"]["gold_share"]["share"]
    assert share == pytest.approx(gold_end / (1 + gold_end), abs=2e-3)
    by_share = verdict["flagged"] is True and "carries" in verdict["reason"]
    assert by_share is flagged_by_share
    if flagged_by_share:
        assert verdict["severity"] == "medium"  # 0.1 / 0.048 = 2.1 x the threshold


def test_the_gold_reward_function_is_declared_or_named_once(tmp_path):
    rows = _staged_rows(120, lambda s: 0.9 * (1 - np.exp(-s / 30)), lambda s: 0.05)
    path = write_log(tmp_path, "gold", rows)
    missing = diagnose_log(str(path), config=diagnostics_config({"reward_hacking": {"gold_reward": "accuracy"}}))
    verdict = missing.to_dict()["modes"]["hacking"]
    assert verdict["flagged"] is None and "'accuracy' was not logged" in verdict["reason"]
    declared = diagnose_log(str(path), config=diagnostics_config(
        {"reward_hacking": {"gold_reward": "strict_format_reward_func"}})).to_dict()["modes"]["hacking"]
    assert declared["numbers"]["eval_column"] == "rewards/strict_format_reward_func/mean"
    for row in rows:
        row["rewards/exact_match/mean"] = row["rewards/correctness_reward_func/mean"]
        row["reward"] += row["rewards/exact_match/mean"]
    # gold_names in order of preference: "correct" comes before "exact", so correctness decides ...
    first = diagnose(write_log(tmp_path, "two_gold", rows)).to_dict()["modes"]["hacking"]
    assert first["numbers"]["eval_column"] == "rewards/correctness_reward_func/mean"
    # ... and two functions matched by the same first word are ambiguous
    several = diagnose_log(str(write_log(tmp_path, "two_gold_b", rows)), config=diagnostics_config(
        {"reward_hacking": {"gold_names": ["exact", "correct"], "not_gold_names": ["format"]}}))
    several = several.to_dict()["modes"]["hacking"]
    assert several["numbers"]["eval_column"] == "rewards/exact_match/mean"
    for row in rows:
        row["rewards/exactness/mean"] = row["rewards/exact_match/mean"]
    several = diagnose_log(str(write_log(tmp_path, "two_gold_c", rows)), config=diagnostics_config(
        {"reward_hacking": {"gold_names": ["exact", "correct"]}})).to_dict()["modes"]["hacking"]
    assert several["flagged"] is None and "several reward functions" in several["reason"]
    for row in rows:
        row["reward"] -= row.pop("rewards/exactness/mean")
    for row in rows:  # a penalty named "incorrect..." is no gold term: the one gold name is back to one function
        row["rewards/incorrect_answer_penalty/mean"] = row.pop("rewards/exact_match/mean")
    one = diagnose_log(str(write_log(tmp_path, "penalty", rows)), config=diagnostics_config(
        {"reward_hacking": {"gold_names": ["Correct"]}})).to_dict()["modes"]["hacking"]
    assert one["numbers"]["eval_column"] == "rewards/correctness_reward_func/mean"
    with pytest.raises(InputError, match="gold_reward"):
        diagnostics_config({"reward_hacking": {"gold_reward": 3}})
    with pytest.raises(InputError, match="gold_by_elimination must be true or false"):
        diagnostics_config({"reward_hacking": {"gold_by_elimination": "yes"}})
    for row in rows:  # Unsloth's Qwen3 / Gemma3 recipes score the answer with check_answer: "answer" names it,
        # and the penalty's "answer" does not count (a word beginning with "penal" rules a function out)
        row["rewards/check_answer/mean"] = row.pop("rewards/correctness_reward_func/mean")
    checked = diagnose(write_log(tmp_path, "check_answer", rows)).to_dict()["modes"]["hacking"]
    assert checked["numbers"]["eval_column"] == "rewards/check_answer/mean" and checked["flagged"] is True
    for row in rows:  # no gold name at all: the reason lists what to declare
        row["rewards/check_numbers/mean"] = row.pop("rewards/check_answer/mean")
    path = write_log(tmp_path, "unnamed", rows)
    unnamed = diagnose(path).to_dict()["modes"]["hacking"]
    assert unnamed["flagged"] is None and "--gold-reward FN, of: " in unnamed["reason"]
    assert "check_numbers" in unnamed["reason"] and "incorrect_answer_penalty" in unnamed["reason"]
    # opted in, a format term and a penalty ruled out leave one function: the gold term by elimination ...
    eliminate = diagnostics_config({"reward_hacking": {"gold_by_elimination": True}})
    left = diagnose_log(str(path), config=eliminate).to_dict()["modes"]["hacking"]
    assert left["numbers"]["eval_column"] == "rewards/check_numbers/mean" and left["flagged"] is True
    for row in rows:  # ... but not where two are left
        row["rewards/brevity/mean"] = 0.0
    two_left = diagnose_log(str(write_log(tmp_path, "two_left", rows)), config=eliminate)
    two_left = two_left.to_dict()["modes"]["hacking"]
    assert two_left["flagged"] is None and "--gold-reward FN, of: " in two_left["reason"]


@pytest.mark.parametrize("names, gold", [
    (("chess_reward_func", "format_reward_func"), "chess_reward_func"),  # a format term beside the task's score
    (("cleaning_env_reward", "cleaning_json_format_reward"), "cleaning_env_reward"),
    (("entity_leak_penalty_reward", "format_adherence_reward", "plausible_ignorance_reward"),
     "plausible_ignorance_reward"),
    (("match_format_exactly", "match_format_approximately"), None),  # every function ruled out
    (("tool_trace_reward_fn", "format_reward_fn", "tool_use_reward_fn"), None),  # two left: which one?
    (("sql_reward",), None),  # one function: nothing to compare the reward with
])
def test_the_gold_term_by_elimination(names, gold):
    """The one reward function that ``not_gold_names`` (format, penal) do not rule out, of two or more, stands in
    for the held-out curve where ``gold_by_elimination`` is opted into (the dev logs' function names that motivated
    it, docs/live-history.md's third round); by default no function is taken without a gold name."""
    frame = pd.DataFrame({"step": [1, 2, 3], "reward": [0.0, 0.5, 1.0],
                          **{f"rewards/{n}/mean": [0.0, 0.2, 0.4] for n in names}})
    assert gold_column(RunCurves("m", None, frame), RewardHackingConfig())[0] is None
    column, how = gold_column(RunCurves("m", None, frame), RewardHackingConfig(gold_by_elimination=True))
    assert column == (None if gold is None else f"rewards/{gold}/mean")
    if gold is not None:
        assert "not ruled out" in how


def test_gold_reward_from_the_command_line_and_the_live_settings(tmp_path, capsys):
    """``pgrpo diagnose --gold-reward`` and ``LiveSettings(gold_reward=...)`` (the callback's, ``pgrpo replay``'s
    and ``pgrpo watch``'s) reach ``diagnostics.reward_hacking.gold_reward``."""
    from pgrpo.live.reads import LiveSettings

    rows = _staged_rows(120, lambda s: 0.9 * (1 - np.exp(-s / 30)), lambda s: 0.05)
    path = write_log(tmp_path, "cli_gold", rows)
    out = tmp_path / "v.json"
    assert main(["diagnose", str(path), "--gold-reward", "accuracy", "--json", str(out)]) in (0, None)
    assert "'accuracy' was not logged" in json.loads(out.read_text())["modes"]["hacking"]["reason"]
    assert LiveSettings(gold_reward="correctness_reward_func").config().reward_hacking.gold_reward == \
        "correctness_reward_func"
    with pytest.raises(InputError, match="gold_reward"):
        LiveSettings(gold_reward="")
