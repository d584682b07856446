"""The plan of a grid as text: one Markdown table row per job (steps, completions, tokens, hours, GPU-hours, the
runtime the rule asks for against the partition limit), a total line, and what each estimate rests on."""

from __future__ import annotations

from typing import Sequence

from pgrpo.tables.render import markdown_table

HEADERS = ["job", "GPUs", "steps", "completions", "tokens generated", "tokens trained",
           "hours (generate / train / eval)", "GPU-h", "runtime / limit (min)", "fits"]


def human(n: float) -> str:
    """12345678 -> ``12.3M``."""
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.1f}{unit}"
    return f"{n:.0f}"


def _row(job) -> list[str]:
    """One job's cells."""
    limit = f"{job.limit_min}" if job.limit_min else "none"
    fits = "yes" if not job.over_limit else f"no: {job.submissions} submissions, resumes from its checkpoints"
    return [job.job, str(job.gpus), "" if job.steps is None else f"{job.steps:,}", f"{job.completions:,}",
            human(job.tokens_generated), human(job.tokens_trained) if job.tokens_trained else "",
            _hours(job), f"{job.gpu_hours:.2f}", f"{job.runtime_min} / {limit}", fits]


def _hours(job) -> str:
    if job.kind != "train" or not job.split:
        return f"{job.hours:.2f}"
    parts = " / ".join(f"{job.split[k]:.1f}" for k in ("generate", "train", "eval"))
    return f"{job.hours:.2f} ({parts})"


def plan_markdown(jobs: Sequence, settings: dict) -> str:
    """The whole plan: settings, a training table, an evaluation table, the total line."""
    profile = settings["profile"]
    limit = settings["partition_limit_min"]
    lines = [
        f"Plan on {settings['gpu']}: {profile['source']}.",
        f"Partition limit {limit or 'none'} min; rules ask for the estimate x {settings['margin']}; mean prompt "
        f"{settings['prompt_tokens'] or 'max_prompt_length (upper bound)'} tokens, mean completion "
        f"{settings['completion_tokens'] or 'max_completion_length (upper bound)'} tokens.",
        "",
    ]
    align = ["l"] + ["r"] * (len(HEADERS) - 2) + ["l"]
    for kind, title in (("train", "Training jobs"), ("evaluate", "Evaluation jobs")):
        chosen = [j for j in jobs if j.kind == kind]
        if chosen:
            lines += [f"{title} ({len(chosen)})", "", markdown_table(HEADERS, [_row(j) for j in chosen], align)]
    train = sum(j.gpu_hours for j in jobs if j.kind == "train")
    evaluate = sum(j.gpu_hours for j in jobs if j.kind == "evaluate")
    over = [j for j in jobs if j.over_limit]
    total = (f"Total: {len(jobs)} jobs, {train + evaluate:,.1f} GPU-hours (training {train:,.1f}, evaluation "
             f"{evaluate:,.1f}); ")
    if over:
        total += (f"{len(over)} job(s) longer than the {limit}-minute limit: each resumes from its last checkpoint "
                  f"across up to {max(j.submissions for j in over)} submissions (the rule's retries).")
    else:
        total += "every job fits the limit."
    lines.append(total)
    return "\n".join(lines) + "\n"
