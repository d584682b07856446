"""The public-log corpus of the forecast, diagnose and live benchmarks (``benchmarks/forecast/data``) holds to the
rules its ``SOURCES.md`` states: every log is labelled or listed as forecast-only, every split is the hash rule's,
every label entry is complete, every log keeps only the stated keys with its source cited, and the Runs table and
the count sentence match the labels. Checked against the stated rules, not against the files' own contents."""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path
from urllib.parse import quote

import pytest

DATA = Path(__file__).resolve().parents[1] / "benchmarks" / "forecast" / "data"
MODES = ("hacking", "degeneracy", "concentration", "instability", "no_learning", "regression", "truncation")
#: the keys SOURCES.md says a log keeps (besides rewards/<fn>/mean|std and eval_*)
KEPT = {"step", "epoch", "reward", "reward_std", "frac_reward_zero_std", "completions/mean_length",
        "completions/clipped_ratio", "completion_length", "kl", "entropy", "grad_norm", "learning_rate"}
REWARD_FN = re.compile(r"^rewards/[^/]+(/(mean|std))?$")  # older TRL logs rewards/<fn> alone


def split_by_rule(file_name: str) -> str:
    """SOURCES.md's split rule, written out again here: holdout iff sha1(file name with .json) % 3 == 0."""
    return "holdout" if int(hashlib.sha1(file_name.encode()).hexdigest(), 16) % 3 == 0 else "dev"


LABELS = json.loads((DATA / "labels.json").read_text())
SOURCES = (DATA / "SOURCES.md").read_text()
LOGS = sorted(p.name for p in DATA.glob("*.json") if p.name not in ("labels.json", "ranges.json", "batches.json"))


def test_every_log_is_labelled_or_listed_as_forecast_only_and_every_label_has_its_log():
    forecast_only = SOURCES.split("## Forecast-only logs", 1)[1].split("## Reasons for each label", 1)[0]
    unlabelled = [name for name in LOGS if name not in LABELS]
    assert all(f"`{name}`" in forecast_only for name in unlabelled), unlabelled
    assert sorted(set(LABELS) - set(LOGS)) == []


@pytest.mark.parametrize("name", sorted(LABELS))
def test_a_label_entry_is_complete_and_its_split_is_the_rule_s(name):
    entry = LABELS[name]
    assert entry["split"] == split_by_rule(name)
    assert set(entry) == {*MODES, "split"}
    for mode in MODES:
        label = entry[mode]
        assert label["label"] in (True, False, None), (mode, label)
        assert isinstance(label["reason"], str) and label["reason"].strip(), mode
        onset = label["onset_step"]
        assert onset is None or (isinstance(onset, (int, float)) and label["label"] is True), (mode, onset)


@pytest.mark.parametrize("name", LOGS)
def test_a_log_cites_its_source_and_keeps_only_the_stated_keys(name):
    log = json.loads((DATA / name).read_text())
    source = log["source"]
    assert re.fullmatch(r"[0-9a-f]{40}", source["commit"]), source
    assert source["url"] in (f"https://github.com/{source['repo']}/blob/{source['commit']}/{source['path']}",
                             f"https://github.com/{source['repo']}/blob/{source['commit']}/{quote(source['path'])}")
    assert source["license"] and all(log[key] for key in ("model", "task", "notes"))
    history = log["log_history"]
    assert len(history) >= 20
    steps = [row["step"] for row in history]
    assert all(b >= a for a, b in zip(steps, steps[1:])), "steps must not go back"
    repeated = [row for previous, row in zip(history, history[1:]) if row["step"] == previous["step"]]
    assert all(any(k.startswith("eval_") for k in row) for row in repeated), "a step logged twice must be an eval"
    for row in history:
        extra = {k for k in row if k not in KEPT and not REWARD_FN.match(k) and not k.startswith("eval_")}
        assert not extra, (row["step"], extra)
        assert all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in row.values())
        assert set(row) - {"step", "epoch", "learning_rate"}, f"step {row['step']}: no reward or metric value"


def test_the_runs_table_and_the_count_sentence_match_the_labels():
    runs = SOURCES.split("## Runs", 1)[1].split("## Forecast-only logs", 1)[0]
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `([^`]+)` \|.*\| (dev|holdout) \|$", runs, re.M)}
    assert rows == {name: entry["split"] for name, entry in LABELS.items()}
    holdout = sum(entry["split"] == "holdout" for entry in LABELS.values())
    assert (f"`dev`: {holdout} holdout, {len(LABELS) - holdout} dev among the {len(LABELS)} labelled logs"
            in SOURCES)


RANGES = json.loads((DATA / "ranges.json").read_text())


def test_every_labelled_log_has_a_declared_range_entry_in_the_stated_form():
    """SOURCES.md, "Declared reward ranges": one entry per labelled log, a basis, a note, ranges LO < HI, null only
    with a reason, and every function named is a ``rewards/<fn>`` column of its log."""
    assert set(LABELS) <= set(RANGES) <= set(LOGS)
    for name, entry in RANGES.items():
        assert set(entry) == {"reward_range", "reward_function_ranges", "reward_weights", "basis", "source_note"}, name
        assert entry["basis"] in ("stated", "derived from code", "none"), name
        assert isinstance(entry["source_note"], str) and len(entry["source_note"]) > 40, name
        assert (entry["basis"] == "none") <= (entry["reward_range"] is None), name
        bounds = [entry["reward_range"], *(entry["reward_function_ranges"] or {}).values()]
        for r in bounds:
            assert r is None or (len(r) == 2 and all(map(math.isfinite, r)) and r[0] < r[1]), (name, r)
        log = json.loads((DATA / name).read_text())
        columns = {key.split("/")[1] for row in log["log_history"] for key in row if key.startswith("rewards/")}
        assert set(entry["reward_function_ranges"] or {}) <= columns, name
        weights = entry["reward_weights"]
        assert weights is None or set(weights) >= set(entry["reward_function_ranges"] or {}) - {
            fn for fn, r in (entry["reward_function_ranges"] or {}).items() if r is None}, name
    stated = sum(RANGES[name]["reward_range"] is not None for name in LABELS)
    assert f"{stated} of the {len(LABELS)} labelled logs have a full `reward_range`" in " ".join(SOURCES.split())
