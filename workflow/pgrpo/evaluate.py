"""Old path of pass@k, kept for callers: the code lives in :mod:`pgrpo.grpo.pass_at_k` (Section 4.3, Table 1)."""

from pgrpo.grpo.pass_at_k import PassAtK, benchmark_pass_at_k, pass_at_k  # noqa: F401
