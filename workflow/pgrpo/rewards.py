"""Old path of the answer checks, kept for callers: the code lives in :mod:`pgrpo.grpo.rewards`."""

from pgrpo.grpo.rewards import (  # noqa: F401
    accuracy_reward,
    completion_text,
    extract_final_answer,
    gold_answer,
    is_correct,
    last_boxed,
)
