"""``pgrpo replay`` (the live callback over a saved log, as if live), ``pgrpo watch`` (a run started without it) and
``pgrpo live-benchmark`` (the replay over the labelled corpus, ours beside the post-training toolkit's callback):
Section 5's failure modes and Section 4.4's forecast read as :class:`pgrpo.live.DynamicsCallback` reads them
(:mod:`pgrpo.stages.live`, :mod:`pgrpo.stages.live_benchmark`)."""

from __future__ import annotations

import sys

from pgrpo.stages.commands import BENCHMARKS, USER_TOOLS, Commands, add_workers_arg, parse_component_ranges

_MODES_HELP = "hacking, degeneracy, concentration, instability, no_learning, regression, truncation"


def add_commands(commands: Commands) -> None:
    p = commands.add("replay", USER_TOOLS, "the live callback over a saved log as if live: when each failure mode "
                                           "would have been flagged, and where a stop rule would have stopped",
                     _replay)
    p.add_argument("log", help="trainer_state.json, a bare log_history JSON list, a TRL output folder, log.csv, a "
                               "W&B/TRL CSV, or a TRL or verl job's console output")
    p.add_argument("--every", type=int, default=10, help="read every N logged training steps (default 10)")
    _stop_rule_arguments(p, "")
    p.add_argument("--json", help="write the replay as JSON")
    p.add_argument("--png", help="draw the replay: the reward, the plateau forecast read by read with its 80%% "
                                 "interval, the reads that flagged each mode and the stop")
    _run_arguments(p, "default: meta's max_steps, else the last logged step")
    p.add_argument("--forecast-every", type=int, default=3, help="forecast at the first and every N-th read, as the "
                                                                 "callback does (default 3; 1: every read)")
    p.add_argument("--synchronous", action="store_true",
                   help="model DynamicsCallback(background=False): a stop at the read that decided it (default: "
                        "the callback's background reads, read n applied at read n+1, so a stop lands one read "
                        "later)")
    p.add_argument("--quiet", action="store_true", help="no verdict line per read")

    p = commands.add("watch", USER_TOOLS, "watch a run started without the callback: re-read its newest log, one "
                                          "verdict line per read, live.json beside it; several runs: a sweep, "
                                          "ranked after every round as forecast --compare ranks it", _watch)
    p.add_argument("path", nargs="+", help="a TRL output folder (its latest checkpoint), a SLURM job's output folder "
                                           "with log.csv, a CSV being rewritten (FILE::RUN: one run of a W&B "
                                           "export), or the job's console output as it is written (slurm-<id>.out: "
                                           "TRL's printed logs or verl's step lines); several: a sweep")
    p.add_argument("--every", type=float, default=60.0, help="seconds between reads (default 60)")
    p.add_argument("--once", action="store_true", help="read once and exit")
    p.add_argument("--out", help="folder for live.json/live.html (default: <the log's folder>/pgrpo); for a sweep, "
                                 "its sweep.json/sweep.png and each run's <run>/live.json (default: pgrpo-sweep/ in "
                                 "the folder that holds the runs)")
    p.add_argument("--stop-threshold", type=float, default=0.05,
                   help="a sweep's ranking: the runs whose P(plateau beats the best so far) is below this are "
                        "named (report only)")
    _run_arguments(p, "for the forecast; the watch ends when the log reaches it; default: meta's max_steps")
    _stop_rule_arguments(p, "; when one fires, stop.json is written, --on-stop runs and the watch exits with status 3")
    p.add_argument("--every-logged", type=int, default=10, help="the stop rules read every N logged training steps, "
                                                                "as the callback does (default 10)")
    p.add_argument("--on-stop", metavar="COMMAND",
                   help="shell command run once when a stop rule fires, e.g. 'scancel $SLURM_JOB_ID' (environment: "
                        "PGRPO_STOP_MODE, PGRPO_STOP_STEP, PGRPO_STOP_READ_STEP, PGRPO_STOP_REASON, PGRPO_STOP_JSON)")
    p.add_argument("--on-alert", metavar="COMMAND",
                   help="shell command run once per mode that the stop rule would stop on (report only: the watch "
                        "goes on), e.g. a notification (environment: PGRPO_ALERT_MODE, PGRPO_ALERT_READ_STEP, "
                        "PGRPO_ALERT_ONSET_STEP, PGRPO_ALERT_SEVERITY, PGRPO_ALERT_REASON, PGRPO_LIVE_JSON)")
    p.add_argument("--alert-on", nargs="*", metavar="MODE",
                   help=f"the modes that alert (default with --on-alert: every mode; {_MODES_HELP})")
    p.add_argument("--idle-timeout", type=float, metavar="SECONDS",
                   help="end the watch when the log has not grown for this long (a job that died)")

    p = commands.add("live-benchmark", BENCHMARKS, "the live callback replayed over the planted and the labelled "
                     "public logs: detection latency, false stops, steps saved (ours vs the post-training toolkit's "
                     "callback)", _live_benchmark)
    p.add_argument("--data-dir", default="benchmarks/forecast/data",
                   help="labelled public TRL logs (labels.json; batches.json: the blind batch, scored apart)")
    p.add_argument("--out", required=True, help="folder for table.md, table.csv, summary.json, reads/")
    p.add_argument("--every", type=int, default=10, help="our read cadence in logged steps (default 10)")
    p.add_argument("--forecast-every", type=int, default=3, help="forecast at the first and every N-th read "
                                                                 "(default 3, the callback's)")
    add_workers_arg(p)


def _stop_rule_arguments(p, effect: str) -> None:
    """The callback's stop rules, as ``pgrpo replay`` and ``pgrpo watch`` take them."""
    p.add_argument("--stop-on", nargs="*", default=[], metavar="MODE",
                   help=f"modes that stop the run ({_MODES_HELP}){effect}")
    p.add_argument("--stop-if-plateau-below", type=float, help="stop when the forecast plateau's upper 80%% bound "
                                                               "is below this")
    p.add_argument("--stop-if-reached", type=float, metavar="X",
                   help="stop when the reward's smoothed level is at or above X (the target met: the rest of the "
                        "budget saved)")


def _run_arguments(p, total_steps: str) -> None:
    """What the user knows of the run, as ``pgrpo replay`` and ``pgrpo watch`` take it."""
    p.add_argument("--meta", help="meta.json (eta, mu, k_ref, G, max_completion_length, max_steps)")
    p.add_argument("--reward-range", type=float, nargs=2, metavar=("LO", "HI"), help="the reward's range, if known")
    p.add_argument("--component-range", nargs=3, action="append", metavar=("FN", "LO", "HI"), default=[],
                   help="declared range of the reward function FN (rewards/FN/mean), repeatable: a function not "
                        "yet rising keeps its headroom in the summed forecast")
    p.add_argument("--max-completion-length", type=int, help="the run's completion cap (for truncation)")
    p.add_argument("--gold-reward", metavar="FN", help="the reward function that scores the task (read as the "
                                                       "held-out curve for hacking when no eval column is logged; "
                                                       "default: the one named correct/accuracy/exact/gold/verif)")
    p.add_argument("--total-steps", type=float, help=f"the run's planned length ({total_steps})")


def _live_benchmark(args):
    from tqdm import tqdm

    from pgrpo.stages import live_benchmark

    with tqdm(desc="live benchmark", unit="log", file=sys.stderr) as bar:
        result = live_benchmark.run_live_benchmark(args.out, args.data_dir, args.every, args.forecast_every,
                                                   progress=lambda _: bar.update(), workers=args.workers)
    from pgrpo.live.benchmark import SPLITS

    logs = sum(n for split, n in result["logs_per_split"].items() if split in SPLITS)
    print(f"pgrpo live-benchmark: {logs} logs -> {args.out}/table.md")


def _replay(args):
    from pgrpo.stages import live

    result = live.run_replay(args.log, every=args.every, stop_on=args.stop_on,
                             stop_if_plateau_below=args.stop_if_plateau_below, out_json=args.json,
                             stop_if_reached=args.stop_if_reached,
                             meta_json=args.meta, reward_range=args.reward_range,
                             max_completion_length=args.max_completion_length, total_steps=args.total_steps,
                             quiet=args.quiet, forecast_every=args.forecast_every,
                             lag_reads=0 if args.synchronous else 1, gold_reward=args.gold_reward,
                             component_ranges=parse_component_ranges(args.component_range) or None,
                             out_png=args.png)
    first = ", ".join(f"{m} at step {s:g}" for m, s in result["first_flagged"].items()) or "no mode flagged"
    stopped = result["stopped"]
    decided = (f", decided by the read at step {stopped['read_step']:g}"
               if stopped and stopped.get("read_step") != stopped["step"] else "")
    alerts = ", ".join(f"{a['mode']} at step {a['read_step']:g}" for a in result["alerts"]) or "none"
    print(f"replay of {args.log}: {len(result['reads'])} reads every {args.every} logged steps"
          f"{' (synchronous)' if args.synchronous else ''}; first flagged: {first}; alerts: {alerts}; "
          + (f"stopped at step {stopped['step']:g}{decided} ({stopped['reason']})" if stopped else "not stopped")
          + (f"; figure: {args.png}" if args.png else ""))


def _watch(args):
    from pgrpo.errors import InputError
    from pgrpo.stages import live
    from pgrpo.stages.watch_sweep import run_watch_sweep, sweep_runs

    runs = sweep_runs(args.path)
    common = dict(every_seconds=args.every, once=args.once, out_dir=args.out, reward_range=args.reward_range,
                  max_completion_length=args.max_completion_length, total_steps=args.total_steps,
                  stop_on=args.stop_on, stop_if_plateau_below=args.stop_if_plateau_below,
                  stop_if_reached=args.stop_if_reached,
                  every_logged=args.every_logged, on_stop=args.on_stop, idle_timeout=args.idle_timeout,
                  gold_reward=args.gold_reward, on_alert=args.on_alert, alert_on=args.alert_on,
                  component_ranges=parse_component_ranges(args.component_range) or None)
    if len(runs) == 1:
        return live.run_watch(runs[0], meta_json=args.meta, **common).exit_status
    if args.meta:
        raise InputError("pgrpo watch: --meta applies to one run; in a sweep each run's meta.json beside its log is "
                         "read")
    outcomes = run_watch_sweep(runs, stop_threshold=args.stop_threshold, **common)
    return max(outcome.exit_status for outcome in outcomes)
