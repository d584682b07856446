"""The live benchmark's Markdown (:mod:`pgrpo.live.benchmark`: the callback's reads of Section 5's failure modes,
Figures 2-5, replayed over the labelled corpus, ours beside the post-training toolkit's live callback): one table
per split, a row per mode and rule set, with issue 20's targets marked met or not per cell."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from pgrpo.diagnose.modes.record import MODES
from pgrpo.live.benchmark import (BLIND, FALSE_STOP_RATE, GROUPS, LATENCY_READS, LATENCY_SHARE, RULE_SETS,
                                  rate_interval)
from pgrpo.live.reads import GOLD_STAND_IN_SHARE
from pgrpo.tables.diagnose_benchmark import logs_sentence
from pgrpo.tables.render import finite_number, markdown_table

HEADERS = ["mode", "rule set", "detected", "median latency: steps · reads · share of run", "latency target",
           "false alarms", "false stops", "false-stop target", "steps saved", "reward lost"]


def _num(x: Any, spec: str) -> str:
    return format(float(x), spec) if finite_number(x) else "–"


def _met(value: Any) -> str:
    return "–" if value is None else ("met" if value else "**not met**")


def record_cells(r: Mapping[str, Any]) -> list[str]:
    """One row's cells (see :data:`HEADERS`); a mode the rule set has no rule for is n/a."""
    if not r["covered"]:
        return [r["mode"], r["rule_set"], f"{r['detected']}/{r['failed']} · n/a", "n/a", "–", "n/a", "n/a", "–",
                "n/a", "n/a"]
    latency = ("–" if r["median_latency"] is None else
               f"{_num(r['median_latency'], '+.0f')} · {_num(r['median_latency_reads'], '+.1f')} · "
               f"{_num(r['median_latency_share'], '+.0%')}")
    timed = f" ({r['timed']} timed)" if r["timed"] != r["failed"] else ""
    return [r["mode"], r["rule_set"], f"{r['detected']}/{r['failed']}{timed}", latency, _met(r["latency_met"]),
            f"{r['false_alarms']}/{r['healthy']}", f"{r['false_stops']}/{r['healthy']}", _met(r["false_stop_met"]),
            _num(r["saved_share"], ".0%") if r["failed"] else "–", _num(r["reward_lost"], "+.2f")]


def split_table(records: Sequence[Mapping[str, Any]], split: str) -> str:
    """The rows of one split, mode by mode, ours then the toolkit's."""
    by = {(r["rule_set"], r["mode"]): r for r in records if r["split"] == split}
    rows = [record_cells(by[(rule_set, mode)]) for mode in (*MODES, "all") for rule_set in RULE_SETS
            if (rule_set, mode) in by]
    return markdown_table(HEADERS, rows, align=["l", "l"] + ["r"] * (len(HEADERS) - 2))


def benchmark_markdown(records: Sequence[Mapping[str, Any]], logs_per_split: Mapping[str, int],
                       settings: Mapping[str, Any]) -> str:
    """``table.md``: what was replayed and how, the targets, and a table per split (holdout last, apart)."""
    toolkit = settings.get("toolkit") or {}
    lines = ["# Live benchmark: the callback's reads replayed over the labelled corpus", "",
             f"Every log replayed as if live with `pgrpo replay`'s code path: ours with the callback's defaults (a "
             f"read every {settings['every']} logged steps over the whole history; the forecast at the first and "
             f"every {settings['forecast_every']} reads, the diagnosis at every read; stop rule per mode: flagged "
             "at severity medium or high at 2 consecutive reads, the failure still on at each (instability's "
             "recurring bursts apart)), beside the post-training toolkit's "
             f"DiagnosticsCallback replayed the same way (a read every {toolkit.get('every')} logged steps over its "
             f"last {toolkit.get('window_rows')} rows, its GRPO rules, a stop on one critical (high) insight). "
             "Logs: " + logs_sentence(logs_per_split, settings.get("blind_batch"))
             + ". The stop rules' choices were made from its planted and dev rows (docs/live-history.md), among "
             "them: no_learning's severity capped by the rise a run has ruled out, no stop on a failure that has "
             "ended by the read, no stop on no_learning or regression while the read's forecast plateau (its upper "
             "80% bound) does not exclude the rise or the return to the peak that the flag rules out, and no stop on "
             f"a hacking flag read off a gold reward function before {GOLD_STAND_IN_SHARE:.0%} of the planned run "
             "(the holdout's false stops of session 24 prompted the search for it; the blind batch is its test). The "
             "holdout split is reported apart.", "",
             "*Detected*: runs labelled yes that some read flags (timed: with a labelled onset). *Latency*: the first "
             "flagging read minus the labelled onset (negative: before it); target met when the median of latency / "
             f"max({LATENCY_SHARE:.0%} of the run, {LATENCY_READS} reads) is at most 1, a missed run counting as "
             "infinite. *False alarms / stops*: runs labelled no that some read flags / that the mode's stop rule "
             f"stops (target: at most {FALSE_STOP_RATE:g} per run). *Steps saved*: the mean share of a failed run's "
             "steps after its stop (0 if not stopped). *Reward lost*: on false stops, the mean of (final reward - "
             "reward at the stop) over the run's reward range. `all`: any mode (stop_on every mode); failed: any "
             "mode labelled yes, healthy: none.", ""]
    notes = {"holdout": " (held out: never used to choose anything)",
             BLIND: " (the logs added after the rules last changed, dev and holdout alike: a blind test)"}
    for split in GROUPS:
        if not logs_per_split.get(split):
            continue
        lines += [f"## {split}{notes.get(split, '')}", "", split_table(records, split).rstrip("\n"), ""]
    ms = settings.get("ms_per_read") or {}
    lines += [f"Replay cost (wall clock, this machine): {_num(ms.get('ours'), '.0f')} ms per read of ours (diagnose "
              f"every read, forecast every {settings['forecast_every']} reads), {_num(ms.get('toolkit'), '.0f')} ms "
              "per read of the toolkit's rules.", ""]
    return "\n".join(lines)


def _interval(k: int, n: int) -> str:
    """`` (95%: lo-hi%)``, the exact interval of the rate behind ``k`` events in ``n`` runs
    (:func:`pgrpo.live.benchmark.rate_interval`); "" without a run."""
    if not n:
        return ""
    lo, hi = rate_interval(int(k), int(n))
    return f" (95%: {100 * lo:.{0 if lo == 0 or lo >= 0.01 else 1}f}-{100 * hi:.0f}%)"


def targets_table(records: Sequence[Mapping[str, Any]]) -> str:
    """Per split (and the blind batch) and rule set: in how many modes each target is met (of the modes it could be
    judged on), and the ``all`` row's detected, median latency, false stops (with the rate's exact 95% interval) and
    steps saved."""
    rows = []
    for split in GROUPS:
        for rule_set in RULE_SETS:
            part = [r for r in records if r["split"] == split and r["rule_set"] == rule_set]
            total = next((r for r in part if r["mode"] == "all"), None)
            if total is None:
                continue
            modes = [r for r in part if r["mode"] != "all"]
            latency = [r["latency_met"] for r in modes if r["latency_met"] is not None]
            stops = [r["false_stop_met"] for r in modes if r["false_stop_met"] is not None and r["covered"]]
            rows.append([split, rule_set, f"{sum(latency)}/{len(latency)}", f"{sum(stops)}/{len(stops)}",
                         f"{total['detected']}/{total['failed']}", _num(total["median_latency_share"], "+.0%"),
                         f"{total['false_stops']}/{total['healthy']}"
                         + _interval(total["false_stops"], total["healthy"]),
                         _met(total["false_stop_met"]), _num(total["saved_share"], ".0%")])
    return markdown_table(["split", "rule set", "latency target met (modes)", "false-stop target met (modes)",
                           "all: detected", "all: median latency (share of run)",
                           "all: false stops (the rate's exact 95% interval)",
                           "all: false-stop target", "all: steps saved"], rows,
                          align=["l", "l"] + ["r"] * 7)
