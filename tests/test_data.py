"""Problem loading (hub id / local path) and the synthetic GSM8K-style generator."""

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest
from pgrpo.errors import InputError
from pgrpo.grpo.data import PROMPT_TEMPLATE, format_prompt, load_problems, prompt_text, read_jsonl, subsample_indices
from pgrpo.grpo.synthetic import generate_problems, make_splits
from pgrpo.stages.model import run_make_synthetic

SMALL = {"seed": 7, "sizes": {"sft": 300, "val": 20, "train": 60, "test": 40, "ood": 20},
         "difficulty": {"min_ops": 1, "max_ops": 3, "start_max": 30, "operand_max": 15, "mul_max": 4},
         "ood_difficulty": {"min_ops": 4, "max_ops": 4}}


def solve_question_independently(question: str) -> int:
    """Recompute a synthetic problem's answer from its English text alone."""
    sentences = [s.strip() for s in re.split(r"(?<=[.?])\s+", question) if s.strip()]
    value = int(re.search(r"has (\d+) ", sentences[0]).group(1))
    for s in sentences[1:-1]:
        k = int(re.search(r"(\d+)", s).group(1))
        if re.search(r"\b(buys|finds|gets|wins) \d+ more", s):
            value += k
        elif re.search(r"\b(gives away|loses|sells|eats) \d+", s):
            value -= k
        elif re.search(r"\d+ times", s):
            value *= k
        else:
            raise AssertionError(f"unparsed sentence: {s!r}")
    assert sentences[-1].startswith("How many")
    return value


@pytest.fixture(scope="module")
def synthetic_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("syn") / "synthetic"
    run_make_synthetic(str(out), SMALL)
    return out


def test_generated_gold_answers_are_correct(synthetic_dir):
    for split in ("sft", "val", "train", "test"):
        for row in read_jsonl(synthetic_dir / f"{split}.jsonl"):
            expected = solve_question_independently(row["question"])
            lines = row["answer"].split("\n")
            assert lines[-1] == f"#### {expected}"
            # every worked step is true arithmetic and chains into the next
            prev = None
            for line in lines[:-1]:
                m = re.fullmatch(r"(\d+)([-+*])(\d+)=(-?\d+)", line)
                assert m, line
                a, op, b, c = int(m.group(1)), m.group(2), int(m.group(3)), int(m.group(4))
                assert c == {"+": a + b, "-": a - b, "*": a * b}[op]
                assert prev is None or a == prev
                prev = c
            assert prev == expected and expected >= 0


def test_splits_sizes_disjoint_and_files(synthetic_dir):
    questions = {}
    for split, n in SMALL["sizes"].items():
        rows = read_jsonl(synthetic_dir / f"{split}.jsonl")
        assert len(rows) == n and all(set(r) == {"question", "answer"} for r in rows)
        questions[split] = {r["question"] for r in rows}
        assert len(questions[split]) == n
    splits = list(questions)
    for i, a in enumerate(splits):
        for b in splits[i + 1 :]:
            assert not questions[a] & questions[b], (a, b)
    meta = json.loads((synthetic_dir / "meta.json").read_text())
    assert meta["counts"] == SMALL["sizes"]


def test_ood_split_has_exactly_the_ood_number_of_operations(synthetic_dir):
    # each operation is one line "a<op>b=c" of the worked solution, before the final "#### N"
    for row in read_jsonl(synthetic_dir / "ood.jsonl"):
        assert row["answer"].count("=") == 4
    for row in read_jsonl(synthetic_dir / "train.jsonl"):
        assert 1 <= row["answer"].count("=") <= 3


def test_generator_is_deterministic_and_respects_difficulty():
    d = {"min_ops": 2, "max_ops": 3, "start_max": 9, "operand_max": 5, "mul_max": 3, "ops": ["add", "mul"]}
    a = generate_problems(50, d, seed=3)
    assert a == generate_problems(50, d, seed=3)
    assert a != generate_problems(50, d, seed=4)
    for p in a:
        assert 2 <= len(p.steps) <= 3 and 1 <= p.start <= 9
        for op, k in p.steps:
            assert (op == "add" and 1 <= k <= 5) or (op == "mul" and 2 <= k <= 3)
    assert make_splits(SMALL)["test"] == make_splits(SMALL)["test"]


def test_bad_synthetic_config_raises_before_writing(tmp_path):
    out = tmp_path / "syn"
    with pytest.raises(InputError, match="synthetic.difficulty.max_ops"):
        run_make_synthetic(str(out), {"difficulty": {"min_ops": 3, "max_ops": 1}})
    with pytest.raises(InputError, match="synthetic.sizes.bogus"):
        run_make_synthetic(str(out), {"sizes": {"bogus": 3}})
    # more distinct problems than the difficulty allows
    with pytest.raises(InputError, match="distinct problems"):
        run_make_synthetic(str(out), {"sizes": {"sft": 10**6}, "difficulty": {"max_ops": 1, "start_max": 2,
                                                                             "operand_max": 2, "mul_max": 2}})
    assert not out.exists() and not list(tmp_path.iterdir())


# ---------------------------------------------------------------------------------------------------------------
# load_problems
# ---------------------------------------------------------------------------------------------------------------


def spec(path, **kw):
    return {"id": "openai/gsm8k", "config": "main", "split": "test", "path": str(path),
            "question_field": "question", "answer_field": "answer", **kw}


def test_load_local_jsonl_path_overrides_id(synthetic_dir):
    ds = load_problems(spec(synthetic_dir / "test.jsonl"), "eval")
    rows = read_jsonl(synthetic_dir / "test.jsonl")
    assert ds.column_names == ["prompt", "answer"] and len(ds) == len(rows)
    assert ds[0]["prompt"] == f"Question: {rows[0]['question']}\nAnswer:"
    assert ds[0]["answer"] == rows[0]["answer"]


def test_load_other_formats_and_saved_dir(tmp_path, synthetic_dir):
    import datasets

    rows = read_jsonl(synthetic_dir / "train.jsonl")[:10]
    frame = datasets.Dataset.from_list([{"problem": r["question"], "solution": r["answer"], "x": 1} for r in rows])
    frame.to_csv(str(tmp_path / "p.csv"))
    frame.to_parquet(str(tmp_path / "p.parquet"))
    frame.save_to_disk(str(tmp_path / "saved"))
    datasets.DatasetDict({"test": frame}).save_to_disk(str(tmp_path / "saveddict"))
    (tmp_path / "p.json").write_text(json.dumps([dict(r) for r in frame]))
    for name in ("p.csv", "p.parquet", "saved", "saveddict", "p.json"):
        ds = load_problems(spec(tmp_path / name, question_field="problem", answer_field="solution"), "train")
        assert len(ds) == 10 and ds[3]["answer"] == rows[3]["answer"], name
        assert ds[3]["prompt"] == format_prompt(rows[3]["question"])


def test_missing_field_names_field_file_and_columns(synthetic_dir):
    path = synthetic_dir / "test.jsonl"
    with pytest.raises(InputError) as err:
        load_problems(spec(path, question_field="problem"), "eval")
    msg = str(err.value)
    assert "data.eval.question_field" in msg and "'problem'" in msg and str(path) in msg
    assert "question" in msg and "answer" in msg and "\n" not in msg
    with pytest.raises(InputError, match="data.train.answer_field.*'solution'"):
        load_problems(spec(path, answer_field="solution"), "train")


def test_missing_or_bad_path(tmp_path):
    with pytest.raises(InputError, match=r"data.train.path: no such file or directory: .*nope.jsonl"):
        load_problems(spec(tmp_path / "nope.jsonl"), "train")
    (tmp_path / "x.txt").write_text("hi")
    with pytest.raises(InputError, match="unsupported file type '.txt'"):
        load_problems(spec(tmp_path / "x.txt"), "train")
    (tmp_path / "bad.jsonl").write_text("{not json\n")
    with pytest.raises(InputError, match="data.train.path: cannot read"):
        load_problems(spec(tmp_path / "bad.jsonl"), "train")
    with pytest.raises(InputError, match="set either 'path'"):
        load_problems({"id": None, "path": None}, "train")


def test_max_examples_deterministic_subset(synthetic_dir):
    path = synthetic_dir / "train.jsonl"
    full = load_problems(spec(path), "train")
    a = load_problems(spec(path, max_examples=7), "train")
    b = load_problems(spec(path, max_examples=7), "train")
    assert len(a) == 7 and a["prompt"] == b["prompt"]
    full_prompts = full["prompt"]
    positions = [full_prompts.index(p) for p in a["prompt"]]
    assert positions == sorted(positions)  # source order kept
    assert subsample_indices(5, None) == [0, 1, 2, 3, 4] and subsample_indices(5, 9) == [0, 1, 2, 3, 4]
    with pytest.raises(InputError, match="max_examples"):
        load_problems(spec(path, max_examples=0), "train")


def test_chat_template_switch(synthetic_dir):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import (
        AutoTokenizer,  # noqa: F401  (a real tokenizer with a template, built locally)
        PreTrainedTokenizerFast,
    )

    raw = Tokenizer(models.WordLevel({"[UNK]": 0, "<eos>": 1}, unk_token="[UNK]"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=raw, eos_token="<eos>", unk_token="[UNK]")
    path = synthetic_dir / "test.jsonl"
    with pytest.raises(InputError, match="data.eval.chat_template is true"):
        load_problems(spec(path, chat_template=True), "eval", tokenizer=tok)
    assert isinstance(load_problems(spec(path, chat_template="auto"), "eval", tokenizer=tok)[0]["prompt"], str)
    tok.chat_template = "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}<assistant>"
    ds = load_problems(spec(path, chat_template="auto", max_examples=2), "eval", tokenizer=tok)
    conv = ds[0]["prompt"]
    assert conv[0]["role"] == "user" and conv[0]["content"].startswith("Question: ")
    assert prompt_text(conv, tok) == f"<user>{conv[0]['content']}<assistant>"


def test_offline_hub_id_not_cached_is_one_clear_line(tmp_path):
    """With HF_HUB_OFFLINE=1 and an empty cache, a hub id fails with one InputError line naming the key."""
    code = textwrap.dedent(
        """
        from pgrpo.grpo.data import load_problems
        from pgrpo.errors import InputError
        try:
            load_problems({"id": "openai/gsm8k", "config": "main", "split": "train", "path": None}, "train")
        except InputError as e:
            print("INPUTERROR:" + str(e))
        """
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    lines = [line for line in out.stdout.splitlines() if line.startswith("INPUTERROR:")]
    assert len(lines) == 1, out.stdout + out.stderr
    assert "data.train.id" in lines[0] and "openai/gsm8k" in lines[0] and "HF_HUB_OFFLINE" in lines[0]


def test_prompt_template_is_the_documented_one():
    assert PROMPT_TEMPLATE == "Question: {question}\nAnswer:"
    assert format_prompt("  What is 2+2? ") == "Question: What is 2+2?\nAnswer:"
