"""Shell commands a live monitor runs when it alerts or stops (issue 20: a monitor left running overnight): the
record in the command's environment, the command's failure reported and never raised (the record it announces is
already on disk). Used by ``pgrpo watch --on-alert/--on-stop`` and by the workflow's runs (``training.live.on_alert``,
a :class:`pgrpo.live.DynamicsCallback` hook)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Mapping


def run_command(flag: str, command: str, env: Mapping[str, str], who: str = "pgrpo watch") -> int:
    """``command`` through the shell with ``env`` added to the environment; its exit status (127 when it could not
    start), a failure reported as one warning line on stderr naming ``flag``."""
    try:
        done = subprocess.run(command, shell=True, env={**os.environ, **env}, check=False)
    except OSError as error:
        print(f"{who}: warning: {flag} could not run: {error}", file=sys.stderr, flush=True)
        return 127
    if done.returncode:
        print(f"{who}: warning: {flag} exited {done.returncode}", file=sys.stderr, flush=True)
    return done.returncode


def alert_environment(alert: Mapping[str, Any], live_json: str | Path) -> dict[str, str]:
    """An alert record (:class:`pgrpo.live.stop_rules.AlertRules`) as ``PGRPO_ALERT_MODE``, ``PGRPO_ALERT_READ_STEP``,
    ``PGRPO_ALERT_ONSET_STEP`` (empty when not known), ``PGRPO_ALERT_SEVERITY``, ``PGRPO_ALERT_REASON`` and
    ``PGRPO_LIVE_JSON``."""
    onset = alert.get("onset_step")
    return {"PGRPO_ALERT_MODE": str(alert["mode"]), "PGRPO_ALERT_READ_STEP": f"{float(alert['read_step']):g}",
            "PGRPO_ALERT_ONSET_STEP": f"{onset:g}" if isinstance(onset, (int, float)) else "",
            "PGRPO_ALERT_SEVERITY": str(alert.get("severity") or ""), "PGRPO_ALERT_REASON": str(alert["reason"]),
            "PGRPO_LIVE_JSON": str(live_json)}


def command_on_alert(command: str, live_json: str | Path) -> Callable[[Mapping[str, Any]], int]:
    """A ``DynamicsCallback(on_alert=...)`` hook that runs ``command`` with the alert in its environment."""

    def on_alert(alert: Mapping[str, Any]) -> int:
        return run_command("on_alert", command, alert_environment(alert, live_json), who="pgrpo live")

    return on_alert
