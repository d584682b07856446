"""The graded synthetic suite of the embedded default (Table 1's role, Section 5.7: transfer against distance from
the training data), generated from config/config.yaml as the workflow does. Every property a set claims is checked
on the question text with a parser of its own, and every gold answer is recomputed from the question alone:

- distractors: one irrelevant sentence with a number, about someone else (of the other pronoun) or an unrelated
  fact, never right before a "times as many"/"splits them" step; removing it leaves the gold answer;
- larger-numbers: every start and add/sub operand in its range and above every one the training splits show;
- heldout-mix: two operations, a sequence the training splits (sft, val, train) never contain;
- no graded question, without its distractor, is a question of any split; adding the suite leaves the splits
  byte-identical and each set has its own seed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from pgrpo.errors import InputError
from pgrpo.grpo.synthetic import NAMES
from pgrpo.stages.model import run_make_suite, run_make_synthetic

ADD = re.compile(r"^(?:She|He) (?:buys|finds|gets|wins) (\d+) more\.$")
SUB = re.compile(r"^(?:She|He) (?:gives away|loses|sells|eats) (\d+)\.$")
MUL = re.compile(r"^(?:She|He) (?:then has (\d+) times as many|makes the pile (\d+) times as big)\.$")
DIV = re.compile(r"^(?:She|He) (?:splits them into (\d+) equal piles and keeps one pile"
                 r"|puts them equally into (\d+) bags and keeps one bag)\.$")
FIRST = re.compile(r"^([A-Z][a-z]+) has (\d+) ([a-z]+)\.$")
LAST = re.compile(r"^How many ([a-z]+) does ([A-Z][a-z]+) have\?$")
OTHER_HAS = re.compile(r"^([A-Z][a-z]+) has (\d+) ([a-z]+)\.$")
FACT = re.compile(r"^([A-Z][a-z]+) (?:is (\d+) years old|lives (\d+) blocks from the park)\.$")
PRONOUN = {name: pronoun for name, pronoun in NAMES}


def sentences(question: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.?])\s+", question) if s.strip()]


def parse(question: str) -> dict:
    """The question read from its text: subject, start, steps [(op, k)], distractor sentences (with their index),
    the question without them, and the answer computed step by step (exact division required)."""
    parts = sentences(question)
    first, last = FIRST.match(parts[0]), LAST.match(parts[-1])
    assert first and last, question
    name, value, items = first.group(1), int(first.group(2)), first.group(3)
    assert last.groups() == (items, name)
    start, steps, distractors, kept = value, [], [], [parts[0]]
    for index, s in enumerate(parts[1:-1], start=1):
        if m := ADD.match(s):
            steps.append(("add", int(m.group(1))))
            value += int(m.group(1))
        elif m := SUB.match(s):
            steps.append(("sub", int(m.group(1))))
            value -= int(m.group(1))
        elif m := MUL.match(s):
            k = int(m.group(1) or m.group(2))
            steps.append(("mul", k))
            value *= k
        elif m := DIV.match(s):
            k = int(m.group(1) or m.group(2))
            assert value % k == 0, question
            steps.append(("div", k))
            value //= k
        elif (m := OTHER_HAS.match(s)) and m.group(1) != name or (m := FACT.match(s)) and m.group(1) == name:
            distractors.append((index, s))
            continue
        else:
            raise AssertionError(f"unparsed sentence {s!r} in {question!r}")
        assert value >= 0, question
        kept.append(s)
    kept.append(parts[-1])
    pronouns = {s.split(" ")[0] for s in parts[1:-1] if ADD.match(s) or SUB.match(s) or MUL.match(s) or DIV.match(s)}
    assert pronouns <= {"She", "He"} and len(pronouns) <= 1
    return {"name": name, "start": start, "items": items, "steps": steps, "answer": value,
            "distractors": distractors, "core": " ".join(kept), "parts": parts}


def worked_lines_are_true(answer: str) -> int:
    """Every worked step ``a<op>b=c`` is true arithmetic and chains into the next; returns the final ``#### N``."""
    lines = answer.split("\n")
    prev = None
    for line in lines[:-1]:
        m = re.fullmatch(r"(\d+)([-+*/])(\d+)=(\d+)", line)
        assert m, line
        a, op, b, c = int(m.group(1)), m.group(2), int(m.group(3)), int(m.group(4))
        assert c == {"+": a + b, "-": a - b, "*": a * b, "/": a // b if a % b == 0 else None}[op], line
        assert prev is None or a == prev
        prev = c
    final = re.fullmatch(r"#### (\d+)", lines[-1])
    assert final and int(final.group(1)) == prev
    return prev


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def default_synthetic(repo_root):
    with open(repo_root / "config" / "config.yaml") as handle:
        return yaml.safe_load(handle)["synthetic"]


@pytest.fixture(scope="module")
def generated(tmp_path_factory, default_synthetic):
    """The default's splits and graded sets, written by the two stages as the rules call them."""
    root = tmp_path_factory.mktemp("suite")
    run_make_synthetic(str(root / "synthetic"), default_synthetic)
    run_make_suite(str(root / "synthetic"), str(root / "suite"), default_synthetic)
    splits = {s: read(root / "synthetic" / f"{s}.jsonl") for s in ("sft", "val", "train", "test", "ood")}
    suite = {name: read(root / "suite" / f"{name}.jsonl") for name in default_synthetic["suite"]}
    return root, splits, suite


def test_the_default_ships_the_graded_suite_in_distance_order(repo_root, default_synthetic):
    with open(repo_root / "config" / "config.yaml") as handle:
        config = yaml.safe_load(handle)
    assert list(config["benchmarks"]) == ["synthetic-test", "synthetic-distractors", "synthetic-ood",
                                          "synthetic-larger-numbers", "synthetic-heldout-mix"]
    for name in default_synthetic["suite"]:
        assert config["benchmarks"][f"synthetic-{name}"]["path"] == f"results/data/suite/{name}.jsonl"


def test_every_gold_answer_is_recomputed_from_the_question(generated, default_synthetic):
    _, _, suite = generated
    for name, rows in suite.items():
        assert len(rows) == default_synthetic["suite"][name]["size"]
        assert len({r["question"] for r in rows}) == len(rows)
        for row in rows:
            assert worked_lines_are_true(row["answer"]) == parse(row["question"])["answer"], row


def test_distractor_set_has_one_irrelevant_sentence_that_leaves_the_answer(generated):
    _, _, suite = generated
    for row in suite["distractors"]:
        p = parse(row["question"])
        assert len(p["distractors"]) == 1, row["question"]
        index, sentence = p["distractors"][0]
        assert re.search(r"\d+", sentence)  # a number that must not enter the answer
        assert 1 <= index <= len(p["parts"]) - 2  # after the first sentence, before the question
        following = p["parts"][index + 1]
        assert not (MUL.match(following) or DIV.match(following)), row["question"]
        other = OTHER_HAS.match(sentence)
        if other:  # someone else, of the other pronoun: the next "she"/"he" is still the subject
            assert other.group(1) != p["name"] and PRONOUN[other.group(1)] != PRONOUN[p["name"]]
        # the answer is that of the question without the distractor: same gold, same worked steps
        without = parse(p["core"])
        assert without["distractors"] == [] and without["answer"] == p["answer"]
        assert int(row["answer"].rsplit("#### ", 1)[1]) == without["answer"]
        assert len(row["answer"].split("\n")) - 1 == len(p["steps"])


def test_larger_numbers_are_beyond_every_number_training_shows(generated, default_synthetic):
    _, splits, suite = generated
    trained = [parse(r["question"]) for s in ("sft", "val", "train") for r in splits[s]]
    max_start = max(p["start"] for p in trained)
    max_operand = max(k for p in trained for op, k in p["steps"] if op in ("add", "sub"))
    d = default_synthetic["suite"]["larger-numbers"]["difficulty"]
    assert (max_start, max_operand) == (20, 10)
    assert d["start_min"] > max_start and d["operand_min"] > max_operand
    for row in suite["larger-numbers"]:
        p = parse(row["question"])
        assert d["start_min"] <= p["start"] <= d["start_max"]
        for op, k in p["steps"]:
            assert op in ("add", "sub", "mul")
            if op in ("add", "sub"):
                assert d["operand_min"] <= k <= d["operand_max"]


def test_heldout_mix_never_occurs_in_the_training_splits(generated):
    _, splits, suite = generated
    trained_mixes = {tuple(op for op, _ in parse(r["question"])["steps"])
                     for s in ("sft", "val", "train") for r in splits[s]}
    assert all("div" not in mix for mix in trained_mixes)
    mixes = set()
    for row in suite["heldout-mix"]:
        mix = tuple(op for op, _ in parse(row["question"])["steps"])
        assert len(mix) == 2 and "div" in mix and mix not in trained_mixes
        mixes.add(mix)
    assert len(mixes) >= 5  # a mix: division before and after each trained operation, not one pattern


def test_no_graded_question_is_a_question_of_any_split(generated):
    _, splits, suite = generated
    split_questions = {r["question"] for rows in splits.values() for r in rows}
    seen = set()
    for name, rows in suite.items():
        cores = {parse(r["question"])["core"] for r in rows}
        assert not cores & split_questions, name
        assert not {r["question"] for r in rows} & split_questions, name
        assert not cores & seen, name  # nor one of another graded set
        seen |= cores


def test_the_suite_leaves_the_splits_byte_identical_and_each_set_has_its_own_seed(tmp_path, generated,
                                                                               default_synthetic):
    root, _, suite = generated
    no_suite = {k: v for k, v in default_synthetic.items() if k != "suite"}
    run_make_synthetic(str(tmp_path / "plain"), no_suite)
    for split in ("sft", "val", "train", "test", "ood", "meta"):
        ext = "json" if split == "meta" else "jsonl"
        assert (tmp_path / "plain" / f"{split}.{ext}").read_bytes() == \
            (root / "synthetic" / f"{split}.{ext}").read_bytes(), split
    # dropping one set, or adding another before it, leaves a set as it was: each is its own stream
    fewer = dict(default_synthetic, suite={"new-first": {"size": 50, "distractors": 2},
                                            "larger-numbers": default_synthetic["suite"]["larger-numbers"]})
    run_make_suite(str(root / "synthetic"), str(tmp_path / "suite"), fewer)
    assert read(tmp_path / "suite" / "larger-numbers.jsonl") == suite["larger-numbers"]
    two = read(tmp_path / "suite" / "new-first.jsonl")
    assert all(len(parse(r["question"])["distractors"]) == 2 for r in two)
    meta = json.loads((tmp_path / "suite" / "meta.json").read_text())
    assert meta["counts"] == {"new-first": 50, "larger-numbers": 300}
    assert meta["sets"]["new-first"]["seed"] != meta["sets"]["larger-numbers"]["seed"]


def test_bad_suite_settings_and_missing_splits_name_the_problem(tmp_path, generated):
    root, _, _ = generated
    with pytest.raises(InputError, match="synthetic.suite.x: unknown key"):
        run_make_suite(str(root / "synthetic"), str(tmp_path / "s"), {"suite": {"x": {"sizes": 3}}})
    with pytest.raises(InputError, match=r"synthetic.suite.x.difficulty.start_min"):
        run_make_suite(str(root / "synthetic"), str(tmp_path / "s"),
                       {"suite": {"x": {"difficulty": {"start_min": 50, "start_max": 20}}}})
    with pytest.raises(InputError, match="synthetic.suite.x.difficulty.ops needs 'add' or 'mul'"):
        run_make_suite(str(root / "synthetic"), str(tmp_path / "s"), {"suite": {"x": {"difficulty": {"ops": ["div"]}}}})
    with pytest.raises(InputError, match="no such file"):
        run_make_suite(str(tmp_path / "absent"), str(tmp_path / "s"), {"suite": {"x": {}}})
    assert not (tmp_path / "s").exists()
