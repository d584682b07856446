"""The live callback's background worker (issue 20: a read must not block the trainer): the worker computes what the
synchronous read computes, read by read; a stop lands one read later (``stop.json``: ``read_step`` < ``step``); a
read that raises, a worker that cannot start or dies, are one warning each and lose no read; the worker imports no
torch, never runs the user's script again, and is gone after train end; and real GRPOTrainer runs of the tiny model
(slow), background beside synchronous on the same seed."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pgrpo.diagnose.planted import SEED, planted_logs

pytest.importorskip("transformers")

PLANTED = planted_logs(SEED)
ROOT = Path(__file__).resolve().parents[1]


class _State:
    def __init__(self, max_steps=300):
        self.log_history, self.global_step, self.max_steps, self.is_world_process_zero = [], 0, max_steps, True


from tests._live_helpers import _Args, _Control  # noqa: E402 - the same stand-ins for a trainer's args and control


def feed(callback, history, after_log=None):
    """A trainer's loop without a trainer: each entry appended to ``state.log_history`` and logged, until the
    callback stops the run or the log ends, then the train end. ``after_log(state)`` runs after each log."""
    state, control, args = _State(), _Control(), _Args()
    callback.on_train_begin(args, state, control)
    for entry in history:
        state.global_step = int(entry["step"])
        state.log_history.append(dict(entry))
        callback.on_log(args, state, control, logs=dict(entry))
        if after_log:
            after_log(state)
        if control.should_training_stop:
            break
    callback.on_train_end(args, state, control)
    return state, control


def read_records(callback):
    """The reads as the callback keeps them, without their timing."""
    return [{k: v for k, v in read.to_dict().items() if k != "seconds"} for read in callback.reads]


def gone(pid: int) -> bool:
    import psutil

    return pid not in [p.pid for p in multiprocessing.active_children()] and (
        not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)


def make(tmp_path, name, **kwargs):
    from pgrpo.live import DynamicsCallback

    return DynamicsCallback(output_dir=str(tmp_path / name), verbose=False, **kwargs)


# ---- the worker computes the synchronous read ------------------------------------------------------------------


def test_the_worker_makes_the_reads_the_synchronous_callback_makes(tmp_path):
    """A planted healthy run read every 60 logged steps: reads at 60, 120, ..., 300, forecasting at the 1st and
    3rd (forecast_every 3, 0-based reads 0 and 2) and carrying them forward: every field the same, plateau included,
    to the last bit."""
    history = PLANTED["planted_healthy"]["log_history"]
    synchronous = make(tmp_path, "sync", every=60, background=False)
    feed(synchronous, history)
    background = make(tmp_path, "background", every=60)
    feed(background, history)
    assert [r.step for r in background.reads] == [60.0, 120.0, 180.0, 240.0, 300.0]
    assert [r.forecast_step for r in background.reads] == [60.0, 60.0, 180.0, 180.0, 180.0]
    assert read_records(background) == read_records(synchronous)
    assert isinstance(background.reads[2].plateau["mean"], float)
    assert background.theory == synchronous.theory and "measured" in background.theory
    assert not background.warnings and background.worker_pid and gone(background.worker_pid)
    assert [c.background for c in background.costs] == [True] * 5
    assert all(c.read_cpu_seconds > 0 for c in background.costs)


def test_a_background_stop_lands_one_read_later_with_the_deciding_read_step(tmp_path):
    """The planted stuck-at-zero run (a reward logged at every step 1..300) with stop_on=["degeneracy"], reads every
    10 logged steps: the synchronous callback stops at the read that decides (step S, the 2nd consecutive flag);
    in the background read S is applied at the next read's log event, step S + 10, and training stops there; its
    last read is made at train end at S + 10 on the same log as a synchronous read would be."""
    history = PLANTED["planted_stuck_at_zero"]["log_history"]
    synchronous = make(tmp_path, "sync", every=10, stop_on=["degeneracy"], background=False)
    sync_state, _ = feed(synchronous, history)
    S = synchronous.stopped["step"]
    assert synchronous.stopped["read_step"] == S == sync_state.global_step and S % 10 == 0
    background = make(tmp_path, "background", every=10, stop_on=["degeneracy"])
    state, control = feed(background, history)
    assert state.global_step == S + 10 and control.should_save
    stop = json.loads((tmp_path / "background" / "pgrpo" / "stop.json").read_text())
    assert (stop["read_step"], stop["step"], stop["lag_reads"], stop["mode"]) == (S, S + 10, 1, "degeneracy")
    assert [r.step for r in background.reads] == [10.0 * (i + 1) for i in range(int(S) // 10 + 1)]
    assert read_records(background)[:-1] == read_records(synchronous)
    entries = {e["step"]: e for e in state.log_history}
    assert entries[S + 10]["pgrpo/read_step"] == S  # the keys of the log at S + 10 describe the read at S
    assert entries[S]["pgrpo/read_step"] == S - 10
    assert gone(background.worker_pid)


def test_the_worker_is_sent_only_the_new_entries_and_keeps_the_log_the_trainer_has():
    """The jobs of three reads, run in-process: the first carries the whole log, the next ones the entries since
    (and the last one sent before, which a later callback added a key to); the worker's log is then the trainer's,
    entry for entry. A log changed otherwise than by appending (an entry removed) is sent whole again."""
    from pgrpo.live import DynamicsCallback
    from pgrpo.live.worker import _WORKER_LOG, run_job, snapshot_history

    callback = DynamicsCallback(every=10, verbose=False)
    state = _State()
    history = [dict(e) for e in PLANTED["planted_healthy"]["log_history"][:60]]
    state.log_history = history[:20]
    job, request = callback._job(state, None)
    assert job.request.history_start == 0 and len(job.request.history) == 20 and len(request.history) == 20
    callback.reads.append(run_job(job).read)  # applied, as at the next read's log event
    state.log_history[-1]["kl"] = 0.5  # added by a callback after this one, at the same log event
    state.log_history += history[20:40]
    job, _ = callback._job(state, None)
    assert job.request.history_start == 19 and len(job.request.history) == 21 and job.request.previous is None
    callback.reads.append(run_job(job).read)
    assert _WORKER_LOG.history == snapshot_history(state.log_history) and _WORKER_LOG.history[19]["kl"] == 0.5
    del state.log_history[5]
    state.log_history += history[40:60]
    job, _ = callback._job(state, None)
    assert job.request.history_start == 0 and len(job.request.history) == 59
    run_job(job)
    assert _WORKER_LOG.history == snapshot_history(state.log_history) and len(_WORKER_LOG.reads) == 3


def test_the_worker_writes_the_previous_reads_files_while_training_goes_on(tmp_path):
    """In the background the trainer's thread writes no file until train end (or a stop): the worker writes read
    n's live.json as it starts read n + 1. Seen at a read's log event, live.json is an earlier read's."""
    history = PLANTED["planted_healthy"]["log_history"][:100]
    callback = make(tmp_path, "pages", every=10)
    live = tmp_path / "pages" / "pgrpo" / "live.json"
    seen = []

    def look(state):
        if state.global_step % 10 == 0 and live.is_file():
            seen.append((state.global_step, json.loads(live.read_text())["live"]["step"]))

    feed(callback, history, look)
    assert seen and all(step < now for now, step in seen)
    assert json.loads(live.read_text())["live"]["step"] == 100.0  # the last, written at train end
    assert len(json.loads(live.read_text())["live"]["reads"]) == 10


# ---- failures: one warning, no read lost --------------------------------------------------------------------------


def test_a_read_that_raises_in_the_worker_is_one_warning_and_the_reads_go_on(tmp_path):
    """An entry the log cannot have (step 1 after step 9: back to the log's first step, not a resume) at the first
    read only (step 10): the worker's read raises (pgrpo diagnose's "steps go backwards"); the warning comes at the
    next read's log event (20), the reads at 20 and 30 are made."""
    history = PLANTED["planted_healthy"]["log_history"][:30]
    bad = {"reward": 0.1, "step": 1}

    def spoil(state):
        if state.global_step == 9:
            state.log_history.append(bad)
        elif state.global_step == 10:
            state.log_history.remove(bad)

    callback = make(tmp_path, "raises", every=10)
    state, control = feed(callback, history, spoil)
    assert len(callback.warnings) == 1 and "read at step 10 skipped" in callback.warnings[0]
    assert "steps go backwards" in callback.warnings[0]
    assert [r.step for r in callback.reads] == [20.0, 30.0] and state.global_step == 30
    assert not control.should_training_stop and gone(callback.worker_pid)


def test_a_worker_that_cannot_start_leaves_synchronous_reads(tmp_path, monkeypatch):
    import pgrpo.live.worker as worker

    class NoProcesses:
        def __init__(self, *args, **kwargs):
            raise OSError("no processes here")

    monkeypatch.setattr(worker, "ProcessPoolExecutor", NoProcesses)
    history = PLANTED["planted_stuck_at_zero"]["log_history"]
    reference = make(tmp_path, "sync", every=10, stop_on=["degeneracy"], background=False)
    feed(reference, history)
    callback = make(tmp_path, "fallback", every=10, stop_on=["degeneracy"])
    feed(callback, history)
    assert len(callback.warnings) == 1 and "could not start" in callback.warnings[0]
    assert "OSError: no processes here" in callback.warnings[0] and callback.background is False
    assert callback.stopped == reference.stopped  # synchronous from the start: the stop at the deciding read
    assert read_records(callback) == read_records(reference)


def test_a_worker_that_dies_loses_no_read(tmp_path):
    """The worker killed after the first read was sent: that read is made in-process from its snapshot, the
    later ones synchronously; one warning; the same reads as the synchronous callback's."""
    history = PLANTED["planted_healthy"]["log_history"][:40]
    reference = make(tmp_path, "sync", every=10, background=False)
    feed(reference, history)
    callback = make(tmp_path, "dies", every=10)

    def kill(state):
        if state.global_step == 10:
            os.kill(callback.worker_pid, signal.SIGKILL)
            for child in multiprocessing.active_children():
                if child.pid == callback.worker_pid:
                    child.join(timeout=10)

    feed(callback, history, kill)
    assert len(callback.warnings) == 1 and "background worker failed" in callback.warnings[0]
    assert read_records(callback) == read_records(reference)
    assert gone(callback.worker_pid)


# ---- the worker process --------------------------------------------------------------------------------------


def test_the_worker_imports_no_torch_and_never_runs_the_users_script_again(tmp_path):
    """A training script without an ``if __name__ == "__main__"`` guard, which imports torch: run once, its worker
    has neither torch nor transformers, and the script's top level ran once (a spawned worker that re-imported
    ``__main__`` would run it again, and could not start a process while bootstrapping)."""
    pytest.importorskip("torch")
    marker = tmp_path / "ran.txt"
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(f"""
        import json
        import torch  # noqa: F401 - the trainer's process has torch
        with open({str(marker)!r}, "a") as f:
            f.write("ran\\n")
        from pgrpo.live.worker import BackgroundReader, worker_modules
        reader = BackgroundReader()
        reader.start()
        modules = reader._pool.submit(worker_modules).result(timeout=120)
        pid = reader.pid
        reader.close()
        print(json.dumps({{"torch": "torch" in modules, "transformers": "transformers" in modules,
                          "reads": "pgrpo.live.reads" in modules, "pid": pid}}))
    """))
    env = dict(os.environ, PYTHONPATH=str(ROOT / "workflow"))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"torch": False, "transformers": False, "reads": True, "pid": result["pid"]}
    assert marker.read_text() == "ran\n"


def test_close_ends_the_worker_and_a_pending_read_is_not_waited_for(tmp_path):
    from pgrpo.live.reads import LiveSettings
    from pgrpo.live.worker import BackgroundReader, ReadRequest, WorkerJob, snapshot_history

    reader = BackgroundReader()
    request = ReadRequest(snapshot_history(PLANTED["planted_healthy"]["log_history"]), LiveSettings(), {}, 900.0,
                          None, 0, None, False, 300)
    reader.submit(WorkerJob(request), request)
    pid = reader.pid
    assert pid in [p.pid for p in multiprocessing.active_children()]
    future = reader.pending.future
    reader.close()
    assert gone(pid) and not reader.running and reader.pending is None
    # not waited for: the read was cancelled or ended with its process, never completed with a result
    assert future.cancelled() or future.exception(timeout=0) is not None


# ---- real GRPOTrainer runs of the tiny model ----------------------------------------------------------------------


from tests._live_helpers import tiny_model  # noqa: E402,F401 - the same module-scoped fixture model


@pytest.mark.slow
def test_a_zero_reward_run_in_the_background_stops_one_read_after_the_deciding_read(tiny_model, tmp_path):
    """every=4 with a log at every step: reads at 4, 8, 12, ...; the stop is applied one read (4 steps) after the
    read that decided, and the checkpoint is saved at the step training stopped."""
    from pgrpo.live import DynamicsCallback
    from tests._live_helpers import plain_trl_run, zero_reward

    callback = DynamicsCallback(every=4, stop_on=["degeneracy"])
    trainer = plain_trl_run(tiny_model, tmp_path, zero_reward, callback, max_steps=40)
    step = trainer.state.global_step
    assert step <= 24  # well before 40: the synchronous callback's bound (20) plus one read
    stop = json.loads((tmp_path / "pgrpo" / "stop.json").read_text())
    assert stop["mode"] == "degeneracy" and stop["step"] == step
    assert stop["read_step"] == step - 4 and stop["lag_reads"] == 1
    assert (tmp_path / f"checkpoint-{step}").is_dir()  # saved before the stop
    assert [r.step for r in callback.reads] == [float(s) for s in range(4, step + 1, 4)]  # the last at train end
    assert callback.worker_pid and gone(callback.worker_pid)


@pytest.mark.slow
def test_background_and_synchronous_runs_of_one_seed_make_the_same_reads(tiny_model, tmp_path):
    """The real reward for 16 steps, every=4: reads at 4, 8, 12, 16 in both; the same modes flagged and the same
    plateau. The keys land one read later in the background: ``pgrpo/read_step`` 4, 8, 12 in the logs at 8, 12,
    16 (the read at 16 is applied at train end, into live.json only)."""
    from pgrpo.live import DynamicsCallback
    from tests._live_helpers import plain_trl_run
    from tests.test_train import lower_or_digit_reward

    def reward(completions, answer, **kw):
        return lower_or_digit_reward(completions, answer)

    runs = {}
    for background in (False, True):
        callback = DynamicsCallback(every=4, stop_on=["degeneracy"], background=background, verbose=False)
        trainer = plain_trl_run(tiny_model, tmp_path / str(background), reward, callback, max_steps=16)
        runs[background] = (callback, trainer)
    (sync, sync_trainer), (bg, bg_trainer) = runs[False], runs[True]
    assert bg_trainer.state.global_step == sync_trainer.state.global_step == 16
    assert [r.step for r in bg.reads] == [r.step for r in sync.reads] == [4.0, 8.0, 12.0, 16.0]
    assert [{m: v["flagged"] for m, v in r.modes.items()} for r in bg.reads] == \
        [{m: v["flagged"] for m, v in r.modes.items()} for r in sync.reads]
    assert [r.plateau for r in bg.reads] == [r.plateau for r in sync.reads]
    assert read_records(bg) == read_records(sync)
    keyed = [(e["step"], e["pgrpo/read_step"]) for e in bg_trainer.state.log_history if "pgrpo/read_step" in e]
    assert keyed == [(8, 4.0), (12, 8.0), (16, 12.0)]
    payload = json.loads((tmp_path / "True" / "pgrpo" / "live.json").read_text())
    assert payload["live"]["step"] == 16 and len(payload["live"]["reads"]) == 4
    assert not (tmp_path / "True" / "pgrpo" / "stop.json").exists()
    assert gone(bg.worker_pid) and not bg.warnings
