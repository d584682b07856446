"""Answer checking by kind (pgrpo.answer_check) against verdicts decided by hand, and against math-verify's own
regression cases (tests/data/math_verify_cases.json, made by tests/data/extract_math_verify_cases.py)."""

import importlib.util
import json
import sys
import threading
from pathlib import Path

import pytest

from pgrpo.grpo.answer_check import (
    KINDS,
    accuracy_reward,
    completion_text,
    extract_final_answer,
    gold_answer,
    is_correct,
    last_boxed,
    resolve_kind,
)

CASES_FILE = Path(__file__).parent / "data" / "math_verify_cases.json"

# (completion, gold, kind, verdict, why the verdict is right). Every verdict below was decided by reading the
# case, not by running the code.
HAND_CASES = [
    # --- GSM8K-style numbers
    ("Natalia sold 48/2 = 24 clips in May.\nShe sold 48+24 = 72 clips.\n#### 72",
     "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n#### 72", "auto", True, "GSM8K final line equals gold"),
    ("#### 1,234", "#### 1234", "auto", True, "thousands separator in the completion"),
    ("#### 1234", "#### 1,234", "auto", True, "thousands separator in the gold"),
    ("#### $1,234.", "1234", "auto", True, "currency sign, separator and full stop around the number"),
    ("#### 1,234,567", "1234567", "auto", True, "two thousands separators"),
    ("#### 1 000", "1000", "auto", True, "space as thousands separator on the answer line"),
    ("So the total is $\\boxed{10{,}080}$.", "10080", "auto", True, "LaTeX thousands separator {,}"),
    ("#### 2,74", "2.74", "auto", True, "decimal comma: two digits after the comma cannot be a thousands group"),
    ("#### 2,74", "274", "auto", False, "2,74 is 2.74, not 274"),
    ("#### -7", "#### -7", "auto", True, "negative number"),
    ("#### 7", "#### -7", "auto", False, "sign matters"),
    ("#### 10", "#### -10", "auto", False, "sign matters in the gold too"),
    ("The temperature drops to -12 degrees.", "-12", "auto", True, "negative final number in plain text"),
    ("#### 3.50", "3.5", "auto", True, "trailing zero of a decimal"),
    ("#### 3.5", "35", "auto", False, "a decimal point is not a separator"),
    ("#### 3/4", "0.75", "auto", True, "fraction equals decimal"),
    ("#### 0.75", "3/4", "auto", True, "decimal equals fraction"),
    ("#### 0.33", "1/3", "auto", False, "0.33 is not 1/3 to six decimals"),
    ("#### 0.333333", "1/3", "auto", True, "1/3 to six decimals (math-verify's float rounding)"),
    ("#### 42.0", "42", "auto", True, "integral decimal"),
    ("#### 12.5%", "12.5", "auto", True, "percent sign after the stated number"),
    ("#### 5 + 3 = 8", "8", "auto", True, "the answer line's result is after its last ="),
    ("#### 1/2 cup", "0.5", "auto", True, "a unit word after a fraction"),
    ("#### twelve", "12", "auto", False, "a number word is not read"),
    ("work\n#### 18\nQuestion: next one\n#### 99", "#### 18", "auto", True, "the first #### answer is the one given"),
    ("work\n#### 18\nQuestion: next one\n#### 99", "#### 99", "auto", False, "rambling after the answer is ignored"),
    ("#### Step 1: add them\n2 + 3 = 5", "#### 5", "auto", True, "a Markdown heading #### is not an answer"),
    ("#### 1. Setting up\nThe answer is 9", "9", "auto", True, "a numbered Markdown heading is not an answer"),
    ("The answer is 5 apples.", "5", "auto", True, "answer phrase with a unit"),
    ("She is 5 years old, so in 3 years she is 8.", "8", "auto", True, "last number of plain text"),
    ("She is 5 years old, so in 3 years she is 8.", "5", "auto", False, "an earlier number is not the answer"),
    ("So $x = \\frac{1}{2}$.", "0.5", "auto", True, "LaTeX fraction in plain text equals the decimal gold"),
    ("\\boxed{\\dfrac{3}{4}}", "0.75", "auto", True, "\\dfrac equals the decimal"),
    ("\\boxed{\\frac{1}{2}}", "2", "auto", False, "a digit of a fraction is not the answer"),
    ("It is H2O.", "2", "auto", False, "a digit inside a word is not a number"),
    ("The code is AZYUK2A", "2", "auto", False, "a digit inside a word is not a number"),
    ("The total is $1,200.", "#### 1200", "auto", True, "dollar amount with separator in plain text"),
    # --- gold without an answer, empty completions
    ("#### 5", "#### None", "auto", False, "a None gold is no answer"),
    ("None", "#### None", "auto", False, "a None gold never matches, not even 'None'"),
    ("#### None", "None", "math", False, "None gold under an explicit kind"),
    ("", "#### 0", "auto", False, "empty completion"),
    ("   \n ", "0", "auto", False, "blank completion"),
    ("#### 5", "", "auto", False, "empty gold"),
    ("#### 5", None, "auto", False, "missing gold"),
    # --- intervals, sets, tuples: commas are not thousands separators
    ("\\boxed{(1,3]}", "(1,3]", "auto", True, "same half-open interval"),
    ("\\boxed{(1,3)}", "(1,3]", "auto", False, "open vs half-open interval"),
    ("\\boxed{13}", "(1,3]", "auto", False, "the comma of an interval is not a separator"),
    ("\\boxed{\\{2,1\\}}", "\\{1,2\\}", "auto", True, "sets are unordered"),
    ("\\boxed{\\{1,3\\}}", "\\{1,2\\}", "auto", False, "different sets"),
    ("\\boxed{12}", "\\{1,2\\}", "auto", False, "a set is not the number 12"),
    ("\\boxed{(2,3)}", "(2,3)", "auto", True, "same pair"),
    ("\\boxed{(3,2)}", "(2,3)", "auto", False, "a pair is ordered"),
    ("$[0,1)$", "[0,1)", "auto", True, "same interval in inline math"),
    ("\\boxed{[0,1]}", "[0,1)", "auto", False, "closed vs half-open"),
    ("\\boxed{12}", "1,2", "auto", False, "the list 1,2 is not 12"),
    ("\\boxed{1, 2}", "The solutions are \\boxed{1} and \\boxed{2}.", "auto", True,
     "adjacent boxes of the gold form one list"),
    ("#### 2.74", "2,74", "number", True, "explicit number kind: a gold decimal comma"),
    ("#### 2.74", "2,74", "auto", False, "under auto a gold 2,74 is the list {2, 74}"),
    # --- LaTeX
    ("\\boxed{\\dfrac{1}{3}}", "\\frac{1}{3}", "auto", True, "\\dfrac is \\frac"),
    ("\\boxed{2\\sqrt{3}}", "\\sqrt{12}", "auto", True, "radicals simplify"),
    ("\\boxed{3\\sqrt{2}}", "\\sqrt{12}", "auto", False, "3 sqrt 2 = sqrt 18"),
    ("\\boxed{\\frac{\\sqrt{2}}{2}}", "\\frac{1}{\\sqrt{2}}", "auto", True, "rationalised denominator"),
    ("\\boxed{5\\text{ cm}}", "5", "auto", True, "\\text{} unit dropped"),
    ("\\boxed{6\\text{ cm}}", "5", "auto", False, "wrong value with a unit"),
    ("The distance is $\\boxed{125\\text{ miles}}$.", "125", "auto", True, "unit words inside the box"),
    ("\\boxed{x+1}", "1+x", "auto", True, "commutativity"),
    ("\\boxed{x+2}", "1+x", "auto", False, "different expression"),
    ("\\boxed{\\text{Evelyn}}", "\\text{Evelyn}", "auto", True, "text answer"),
    ("\\boxed{\\frac{\\pi}{2}}", "\\frac{\\pi}{2}", "auto", True, "same expression with pi"),
    ("\\boxed{\\pi}", "\\frac{\\pi}{2}", "auto", False, "pi is not pi/2"),
    ("The answer is 9", "9", "latex", False, "latex kind: the answer must be written in LaTeX"),
    ("The answer is $9$", "9", "latex", True, "latex kind with inline math"),
    # --- multiple choice
    ("The answer is (B).", "\\text{(B)}", "auto", True, "letter after the answer phrase"),
    ("\\boxed{B}", "(B)", "auto", True, "boxed letter"),
    ("\\boxed{\\text{(C)}}", "B", "auto", False, "a different letter"),
    ("**Answer: D**", "D", "auto", True, "bold answer line"),
    ("After checking all of them, the correct option is (E).", "E", "choice", True, "option phrase"),
    ("The answer is (A).", "E", "choice", False, "a different letter"),
    ("#### 12", "C", "auto", False, "a number is not a letter"),
    # --- AIME integers
    ("\\boxed{042}", "42", "integer", True, "leading zeros in the completion"),
    ("#### 42", "042", "integer", True, "leading zeros in the gold"),
    ("#### 42.5", "42", "integer", False, "not an integer"),
    ("\\boxed{41}", "42", "integer", False, "off by one"),
    ("#### 7", "1/2", "integer", False, "a non-integer gold is no integer gold"),
]


@pytest.mark.parametrize("completion, gold, kind, verdict, why", HAND_CASES,
                         ids=[f"{i}-{c[4][:40]}" for i, c in enumerate(HAND_CASES)])
def test_hand_checked_cases(completion, gold, kind, verdict, why):
    assert is_correct(completion, gold, kind) is verdict, why


def test_hand_table_size_and_kinds():
    assert len(HAND_CASES) >= 60
    assert {c[2] for c in HAND_CASES} <= set(KINDS)
    assert sum(not c[3] for c in HAND_CASES) >= 25


# ---------------------------------------------------------------------------------------------------------------
# math-verify's regression cases
# ---------------------------------------------------------------------------------------------------------------

#: compare_strings' match_types -> the answer kind that asks for the same extraction.
KIND_OF_MATCH_TYPES = {("expr",): "number", ("latex",): "latex", ("latex", "expr"): "auto"}


@pytest.fixture(scope="module")
def regression_cases():
    doc = json.loads(CASES_FILE.read_text(encoding="utf-8"))
    assert doc["repository"] == "huggingface/Math-Verify" and len(doc["commit"]) == 40
    assert doc["files"] == ["tests/test_all.py", "tests/test_numina_cases.py"] and doc["license"]
    assert doc["count"] == len(doc["cases"]) >= 200
    return doc["cases"]


def _plain_math_verify(case, with_config: bool) -> bool:
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    if not with_config:
        return verify(parse(case["gold"]), parse(case["prediction"]))
    cfg = case["config"]
    targets = [LatexExtractionConfig(boxed_match_priority=0) if t == "latex" else ExprExtractionConfig()
               for t in cfg["match_types"]]
    return verify(parse(case["gold"], targets), parse(case["prediction"], targets), float_rounding=cfg["precision"],
                  strict=cfg["strict"], allow_set_relation_comp=cfg["allow_set_relation_comp"])


def test_math_verify_regression_agreement(regression_cases):
    ours = plain = plain_cfg = 0
    misses = []
    for case in regression_cases:
        cfg = case["config"]
        got = is_correct(case["prediction"], case["gold"], KIND_OF_MATCH_TYPES[tuple(cfg["match_types"])],
                         float_rounding=cfg["precision"], allow_set_relation_comp=cfg["allow_set_relation_comp"])
        ours += got is case["expected"]
        plain += _plain_math_verify(case, with_config=False) is case["expected"]
        plain_cfg += _plain_math_verify(case, with_config=True) is case["expected"]
        if got is not case["expected"]:
            misses.append(case["id"])
    n = len(regression_cases)
    print(f"agreement on {n} cases: answer_check {ours / n:.1%}, math-verify defaults {plain / n:.1%}, "
          f"math-verify with each case's config {plain_cfg / n:.1%}")
    assert ours >= plain and ours >= plain_cfg, misses


# ---------------------------------------------------------------------------------------------------------------
# Chat format, the TRL reward, threads, gold and answer extraction, speed
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "completion, gold, verdict",
    [
        ([{"role": "assistant", "content": "2 + 3 = 5\n#### 5"}], "#### 5", True),
        ([{"role": "assistant", "content": "#### 6"}], "#### 5", False),
        ([{"role": "user", "content": "#### 5"}, {"role": "assistant", "content": "#### 6"}], "#### 5", False),
        ([{"role": "assistant", "content": [{"type": "text", "text": "so \\boxed{(1,3]}"}]}], "(1,3]", True),
        ({"role": "assistant", "content": "\\boxed{B}"}, "B", True),
        ([], "#### 5", False),
        ([{"role": "assistant", "content": None}], "#### 5", False),
        (None, "#### 5", False),
        (5, "#### 5", False),
    ],
)
def test_chat_format_completions(completion, gold, verdict):
    assert is_correct(completion, gold) is verdict


def test_completion_text_takes_last_assistant_message():
    assert completion_text([{"role": "assistant", "content": "a"}, {"role": "tool", "content": "t"},
                            {"role": "assistant", "content": "b"}]) == "b"
    assert completion_text("x") == "x" and completion_text(None) == "" and completion_text([{"content": 3}]) == ""


def test_accuracy_reward_trl_signature():
    completions = ["#### 5", [{"role": "assistant", "content": "so \\boxed{5}"}], "#### 6", None, 3, "\x00\xff", []]
    rewards = accuracy_reward(completions=completions, answer=["2+3=5\n#### 5"] * 7, prompts=["p"] * 7,
                              completion_ids=[[1]] * 7, trainer_state=None)
    assert rewards == [1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    kinds = accuracy_reward(completions=["\\boxed{042}", "\\boxed{B}"], answer=["42", "B"],
                            answer_kind=["integer", "choice"])
    assert kinds == [1.0, 1.0]


def test_works_in_a_worker_thread():
    cases = [("\\boxed{\\dfrac{1}{2}}", "0.5", True), ("\\boxed{(1,3]}", "(1,3]", True), ("#### 7", "#### 8", False),
             ("The answer is $\\{1,2\\}$", "\\{2,1\\}", True)]
    results, errors = [], []

    def work():
        try:
            results.extend(is_correct(c, g) for c, g, _ in cases)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    worker = threading.Thread(target=work)
    worker.start()
    worker.join(60)
    assert not errors and results == [v for _, _, v in cases]


def test_pathological_input_is_refused_before_sympy(monkeypatch):
    """A number SymPy would spend unbounded time building is never handed to math-verify's parser (a signal cannot
    interrupt SymPy inside one huge integer operation), and the answer is simply wrong. How long a refusal takes is
    measured in benchmarks/bench_answer_check.py, not asserted here."""
    import math_verify

    parsed: list[str] = []
    real_parse = math_verify.parse

    def recording_parse(text, *args, **kwargs):
        parsed.append(text)
        return real_parse(text, *args, **kwargs)

    monkeypatch.setattr(math_verify, "parse", recording_parse)
    verdicts: list[bool] = []
    worker = threading.Thread(target=lambda: verdicts.extend(
        [is_correct("\\boxed{10^{10^{10}}}", "5"), is_correct("\\boxed{99999!}", "5")]), daemon=True)
    worker.start()
    worker.join(120)  # a hang is a failure, not a wait for the CI's time limit
    assert verdicts == [False, False]
    assert parsed, "the gold is parsed by math-verify"
    assert not any("10^{10^{10}}" in text or "99999!" in text for text in parsed)


def test_unknown_kind_raises():
    with pytest.raises(ValueError):
        is_correct("#### 5", "5", kind="numeric")
    with pytest.raises(ValueError):
        gold_answer("5", kind="numeric")


@pytest.mark.parametrize(
    "field, kind, gold",
    [
        ("Janet has 3 eggs.\n3*2=6\n#### 6", "auto", "6"),
        ("#### 1,000,000", "auto", "1000000"),
        ("#### None", "auto", None),
        ("####", "auto", None),
        ("(1,3]", "auto", "(1,3]"),
        ("\\{1,2\\}", "auto", "\\{1,2\\}"),
        ("$[0,1)$", "auto", "[0,1)"),
        ("\\frac{14}{3}", "auto", "\\frac{14}{3}"),
        ("The answer is \\boxed{10}.", "auto", "10"),
        ("So $n = \\boxed{-2}$ and $\\boxed{1}$.", "auto", "-2, 1"),
        ("He has 3 apples. The answer is: 42", "auto", "42"),
        ("\\text{(B)}", "auto", "B"),
        ("1000.0", "auto", "1000.0"),
        ("#### 3/4", "auto", "3/4"),
        ("1000.0", "integer", "1000"),
        (" 72 ", "auto", "72"),
        (72, "auto", "72"),
        (2.5, "auto", "2.5"),
        ("042", "integer", "42"),
        ("1/2", "integer", None),
        ("2,74", "number", "2.74"),
        ("2,74", "auto", "2,74"),
        ("50\\%", "number", "50"),
        ("x", "choice", None),
        ("", "auto", None),
        (None, "auto", None),
        (True, "auto", None),
    ],
)
def test_gold_answer(field, kind, gold):
    assert gold_answer(field, kind) == gold


@pytest.mark.parametrize(
    "text, answer",
    [
        ("Natalia sold 48/2 = 24 clips.\n#### 72", "72"),
        ("#### $1,234.", "1234"),
        ("#### 3.50", "3.50"),
        ("#### 2,74", "2.74"),
        ("work\n#### 18\nQuestion: next\n#### 99", "18"),
        ("so the answer is \\boxed{\\frac{1}{2}}.", "\\frac{1}{2}"),
        ("\\boxed{(1,3]}", "(1,3]"),
        ("She pays $1,050.75 in total.", "1050.75"),
        ("no digits here", None),
        ("", None),
        (None, None),
    ],
)
def test_extract_final_answer(text, answer):
    assert extract_final_answer(text) == answer


def test_resolve_kind():
    assert [resolve_kind(g) for g in ("1234", "-3/4", "B", "(1,3]", "\\frac{1}{2}", "2,74")] == [
        "number", "number", "choice", "math", "math", "math"]


def test_last_boxed():
    assert last_boxed("first \\boxed{1} then \\boxed{\\frac{a}{b^{2}}}") == "\\frac{a}{b^{2}}"
    assert last_boxed("\\boxed{1}\\boxed{2}") == "1, 2"
    assert last_boxed("\\boxed{") is None and last_boxed("none") is None


def test_gsm8k_style_completions_are_checked_on_their_final_line():
    """The GSM8K-style '#### N' completions the reward sees at every step, with thousands separators, right against
    their gold and wrong against a gold one digit longer. Their speed (calls per second) is measured in
    benchmarks/bench_answer_check.py, not asserted here."""
    completions, golds = gsm8k_style_cases()
    assert all(is_correct(c, g) for c, g in zip(completions, golds))
    assert not any(is_correct(c, g.replace("#### ", "#### 1")) for c, g in zip(completions, golds))


def gsm8k_style_cases() -> tuple[list[str], list[str]]:
    """The 2000 GSM8K-style completions ('a + b = c' then '#### c' with thousands separators) and golds that
    benchmarks/bench_answer_check.py times, built by that script's own builder (one set of cases for both)."""
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_answer_check.py"
    spec = importlib.util.spec_from_file_location("bench_answer_check_under_test", path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))  # the script imports benchmarks/timing.py beside it
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module.gsm8k_style()
