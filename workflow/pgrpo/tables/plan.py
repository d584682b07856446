"""The plan of a grid as text (:mod:`pgrpo.stages.plan`): what each estimate rests on (the profile, each model's
shape, the cost terms measured and those still assumed), both eval modes side by side per training run and for the
grid, one Markdown table row per job (steps, completions, tokens, hours, GPU-hours, the sequences the engine runs at
once, the signal lead, the runtime asked against the partition limit and whether the job fits its limit times its
submissions), the planned against the measured seconds where a run measured them, and a total line."""

from __future__ import annotations

from typing import Sequence

from pgrpo.grpo.plan_models import assumed_terms
from pgrpo.tables.render import markdown_table

HEADERS = ["job", "GPUs", "steps", "completions", "tokens generated", "tokens trained",
           "hours (generate / train / eval / sync / saves)", "GPU-h", "seqs at once", "signal lead (s)",
           "runtime / limit (min)", "fits"]
MODE_HEADERS = ["run", "inline: hours", "inline: submissions", "checkpoints: train hours",
                "checkpoints: eval jobs", "checkpoints: submissions", "fits (inline / checkpoints)"]


def human(n: float) -> str:
    """12345678 -> ``12.3M``."""
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.1f}{unit}"
    return f"{n:.0f}"


def fits_text(job) -> str:
    """``yes``, or why not: the submissions it needs against those allowed, or an evaluation over the limit."""
    if not job.feasible:
        return "no: start-up + signal lead exceed the limit"
    if job.kind != "train":
        return "yes" if job.fits else f"no: {job.hours * 60:.0f} min in one job over the {job.limit_min}-min limit"
    allowed = f" of {job.max_submissions} allowed" if job.max_submissions else ""
    if job.submissions == 1:
        return "yes"
    if job.fits:
        return f"yes: {job.submissions} submissions{allowed}, resumes from its checkpoints"
    return f"no: {job.submissions} submissions{allowed}"


def _row(job, minutes: bool = False) -> list[str]:
    """One job's cells (times in minutes where every job is short: the CPU default)."""
    limit = f"{job.limit_min}" if job.limit_min else "none"
    name = job.job if job.count == 1 else f"{job.job} ({job.count} jobs)"
    lead = "" if job.signal_lead_s is None else f"{job.signal_lead_s:,}"
    return [name, str(job.gpus), "" if job.steps is None else f"{job.steps:,}", f"{job.completions:,}",
            human(job.tokens_generated), human(job.tokens_trained) if job.tokens_trained else "",
            _hours(job, minutes), f"{job.gpu_hours:.2f}", "" if job.concurrency is None else str(job.concurrency), lead,
            f"{job.runtime_min} / {limit}", fits_text(job)]


def _hours(job, minutes: bool = False) -> str:
    scale = 60 if minutes else 1
    if job.kind != "train" or not job.split:
        return f"{job.hours * scale:.2f}"
    parts = " / ".join(f"{job.split.get(k, 0.0) * scale:.1f}" for k in ("generate", "train", "eval", "sync", "saves"))
    return f"{job.hours * scale:.2f} ({parts})"


def _mode_rows(modes: dict) -> list[list[str]]:
    inline = {j.job: j for j in modes.get("inline", []) if j.kind == "train"}
    checkpoints = {j.job: j for j in modes.get("checkpoints", [])}
    rows = []
    for name, a in inline.items():
        b = checkpoints.get(name)
        ev = checkpoints.get(name.replace("train/", "train_eval/", 1))
        if b is None:
            continue
        evals = f"{ev.count} x {ev.hours:.2f} h at {ev.concurrency} seqs" if ev else "none"
        fits = f"{'yes' if a.fits else 'no'} / {'yes' if b.fits and (ev is None or ev.fits) else 'no'}"
        rows.append([name.removeprefix("train/"), f"{a.hours:.1f}", str(a.submissions), f"{b.hours:.1f}", evals,
                     str(b.submissions), fits])
    return rows


def _mode_totals(totals: dict, configured: str) -> list[str]:
    lines = []
    for mode, t in totals.items():
        mark = " (configured)" if mode == configured else ""
        over = t["not_fitting"]
        lines.append(
            f"- `eval_mode: {mode}`{mark}: {t['gpu_hours']:,.1f} GPU-hours in {t['jobs']:,} jobs; evaluation "
            f"{100 * t['eval_share']:.0f}% of them (the held-out evaluation of training "
            f"{t['training_eval_gpu_hours']:,.1f} GPU-h = {100 * t['training_eval_share']:.0f}%, the benchmarks "
            f"{t['benchmark_gpu_hours']:,.1f}); a training job takes at most {t['max_submissions']} submission(s); "
            + (f"{len(over)} job(s) do not fit: {', '.join(over[:4])}{' ...' if len(over) > 4 else ''}."
               if over else "every job fits."))
    return lines


def _measured(plan) -> list[str]:
    rows = [[j.job, f"{j.hours * 60:.1f}", f"{plan.measured[j.job] / 60:.1f}",
             f"{plan.measured[j.job] / (j.hours * 3600):.2f}"] for j in plan.jobs if j.job in plan.measured]
    if not rows:
        return []
    c = plan.calibration()
    return ["Planned against measured (results/benchmarks/**/*.tsv, Snakemake `benchmark:`)", "",
            markdown_table(["job", "planned min", "measured min", "measured / planned"], rows, ["l", "r", "r", "r"]),
            f"Over {c['jobs']} measured job(s): measured / planned = {c['ratio']:.2f} (divide the profile's rates "
            "by this to calibrate it on this machine).", ""]


def plan_markdown(plan, settings: dict | None = None) -> str:
    """The whole plan of a :class:`pgrpo.stages.plan.GridPlan` (or of a list of jobs with their settings)."""
    grid = settings is None
    if grid:
        jobs, settings, modes = plan.jobs, plan.settings, plan.modes
        totals, configured = plan.mode_totals(), plan.eval_mode
    else:
        jobs, modes, totals, configured = plan, {}, {}, None
    jobs: Sequence = list(jobs)
    profile = settings["profile"]
    limit = settings["partition_limit_min"]
    measured_terms = ", ".join(profile.get("measured") or []) or "none"
    lines = [
        f"Plan on {settings['gpu']}: {profile['source']}.",
        f"Cost terms measured on this profile: {measured_terms}; still assumptions: "
        f"{', '.join(assumed_terms(profile))} (benchmarks/gpu_check.sh measures them).",
        f"Partition limit {limit or 'none'} min; rules ask for the estimate x {settings['margin']} (+ the signal "
        f"lead); mean prompt {settings['prompt_tokens'] or 'max_prompt_length (upper bound)'} tokens, mean "
        f"completion {settings['completion_tokens'] or 'max_completion_length (upper bound)'} tokens; "
        f"submissions allowed per training job: {settings.get('max_submissions') or 'no cap'}.",
    ]
    for name, source in (settings.get("shapes") or {}).items():
        lines.append(f"Model {name}: {source}.")
    lines.append("")
    if totals:
        lines += ["Eval modes side by side (training.eval_mode: inline evaluates inside the training job through "
                  "TRL's engine; checkpoints saves the adapter and scores it in separate jobs at full batch)", "",
                  markdown_table(MODE_HEADERS, _mode_rows(modes), ["l"] + ["r"] * 5 + ["l"]), ""]
        lines += _mode_totals(totals, configured) + [""]
    minutes = max((j.hours for j in jobs), default=0.0) < 2
    headers = [h.replace("hours (", "minutes (") if minutes else h for h in HEADERS]
    align = ["l"] + ["r"] * (len(HEADERS) - 2) + ["l"]
    for kind, title in (("train", "Training jobs"), ("train_eval", "Evaluation jobs of the training runs"),
                        ("evaluate", "Evaluation jobs")):
        chosen = [j for j in jobs if j.kind == kind]
        if chosen:
            lines += [f"{title} ({sum(j.count for j in chosen)})", "",
                      markdown_table(headers, [_row(j, minutes) for j in chosen], align), ""]
    if grid:
        lines += _measured(plan)
    train = sum(j.gpu_hours for j in jobs if j.kind in ("train", "train_eval"))
    evaluate = sum(j.gpu_hours for j in jobs if j.kind == "evaluate")
    over = [j for j in jobs if not j.fits]
    total = (f"Total: {sum(j.count for j in jobs)} jobs, {train + evaluate:,.1f} GPU-hours (training "
             f"{train:,.1f}, evaluation {evaluate:,.1f}); ")
    if over:
        total += f"{len(over)} job(s) do not fit the {limit}-minute limit times their submissions."
    else:
        total += "every job fits its limit times its submissions."
    lines.append(total)
    return "\n".join(lines) + "\n"
