"""Answer extraction and the binary reward (Section 4.2) on hand-written cases."""

import pytest
from pgrpo.grpo.rewards import (
    accuracy_reward,
    completion_text,
    extract_final_answer,
    gold_answer,
    is_correct,
    numbers_equal,
)


@pytest.mark.parametrize(
    "text, expected",
    [
        # GSM8K style: the number after ####
        ("Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n#### 72", "72"),
        ("#### 1,234", "1234"),
        ("#### $1,234.", "1234"),
        ("#### -7", "-7"),
        ("#### 3.50", "3.50"),
        ("#### 3/4", "3/4"),
        ("work\n#### 18\nQuestion: next one\n#### 99", "18"),  # the first #### is the answer given
        # boxed LaTeX
        ("so the answer is \\boxed{42}.", "42"),
        ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
        ("first \\boxed{1} then \\boxed{\\frac{a}{b^{2}}}", "\\frac{a}{b^{2}}"),
        # last number
        ("5+3=8\n8*2=16", "16"),
        ("She pays $1,050.75 in total.", "1050.75"),
        ("It drops to -12 degrees.", "-12"),
        ("The answer is 5, 6", "5"),  # the answer stated after "The answer is" (math-verify's reading), not the last number
        # garbage
        ("no digits here", None),
        ("", None),
        ("####", None),
        ("\\boxed{", None),
        (None, None),
        (17, None),
    ],
)
def test_extract_final_answer(text, expected):
    assert extract_final_answer(text) == expected


@pytest.mark.parametrize(
    "a, b, equal",
    [
        ("72", "72", True),
        ("72.0", "72", True),
        ("1,234", "1234", True),
        ("$5", "5", True),
        ("-3", "-3.000", True),
        ("0.5", "1/2", True),
        ("71", "72", False),
        ("-72", "72", False),
        ("abc", "72", False),
        ("", "0", False),
        (None, "1", False),
    ],
)
def test_numbers_equal(a, b, equal):
    assert numbers_equal(a, b) is equal


def test_gold_answer_forms():
    assert gold_answer("Janet has 3 eggs.\n3*2=6\n#### 6") == "6"
    assert gold_answer("#### 1,000,000") == "1000000"
    assert gold_answer("\\frac{14}{3}") == "\\frac{14}{3}"
    assert gold_answer("The answer is \\boxed{10}.") == "10"
    assert gold_answer(" 72 ") == "72"
    assert gold_answer(72) == "72"
    assert gold_answer("") is None and gold_answer(None) is None


@pytest.mark.parametrize(
    "completion, gold, correct",
    [
        (" 5+3=8\n#### 8", "5+3=8\n#### 8", True),
        (" 5+3=9\n#### 9", "5+3=8\n#### 8", False),
        ("The total is $1,200.", "#### 1200", True),
        ("\\boxed{0.5}", "\\frac{1}{2}", True),  # math-verify: decimal vs LaTeX fraction
        ("\\boxed{\\frac{2}{4}}", "\\frac{1}{2}", True),
        ("\\boxed{\\frac{1}{3}}", "\\frac{1}{2}", False),
        ("\\boxed{x+1}", "1+x", True),
        ("#### 10", "#### -10", False),
        ("blah", "#### 3", False),
        ("", "#### 0", False),
        ("#### 3", "", False),
        ("#### 3", None, False),
    ],
)
def test_is_correct(completion, gold, correct):
    assert is_correct(completion, gold) is correct


def test_completion_text_forms():
    assert completion_text("abc") == "abc"
    assert completion_text([{"role": "assistant", "content": "x"}]) == "x"
    assert completion_text([{"role": "user", "content": "q"}, {"role": "assistant", "content": "y"}]) == "y"
    assert completion_text(None) == "" and completion_text([]) == "" and completion_text([{"content": 3}]) == ""


def test_accuracy_reward_trl_signature_and_garbage():
    completions = ["#### 5", [{"role": "assistant", "content": "so \\boxed{5}"}], "#### 6", None, 3, "\x00\xff", []]
    answers = ["2+3=5\n#### 5"] * len(completions)
    rewards = accuracy_reward(completions=completions, answer=answers, prompts=["p"] * len(completions),
                              completion_ids=[[1]] * len(completions), trainer_state=None)
    assert rewards == [1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    assert all(isinstance(r, float) for r in rewards)
