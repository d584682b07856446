"""A one-node SLURM cluster on localhost for the tests: munged, slurmctld and slurmd started by hand.

No systemd here, so the daemons are started directly and stopped by the PIDs this module started (a daemon that
was already running is used, never stopped). ``/etc/slurm/slurm.conf`` is where the configuration must be (the
SLURM executor plugin strips ``SLURM_CONF`` from the jobs it submits); this module writes it only when it is absent
or one of its own (marked by :data:`MARKER`) and removes it again on :meth:`LocalSlurm.stop`.

The node has two partitions, ``cpu`` (default) and ``gpu``, and one fake GPU (``Gres=gpu:1``, ``File=/dev/null``):
SLURM schedules ``--gpus=1`` against it, nothing else sees a GPU. Without slurmdbd ``sacct`` fails, so
``MinJobAge=600`` keeps finished jobs visible to ``squeue`` (the test profile sets the plugin's status command to
squeue). ``DefMemPerCPU`` lets jobs without ``--mem`` run side by side; ``proctrack/linuxproc`` and ``task/none``
need no cgroups.

Run by hand:  python tests/slurm/local_cluster.py install|start|stop   (start prints the state directory)
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __name__ == "__main__":  # run as a script: the repository root, for tests.apt_install
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.apt_install import apt_install  # noqa: E402

MARKER = "# written by predictable-grpo tests/slurm/local_cluster.py"
SLURM_CONF = Path("/etc/slurm/slurm.conf")
GRES_CONF = Path("/etc/slurm/gres.conf")
PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge")
BINARIES = ("slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "scancel", "munged")


class ClusterUnavailable(RuntimeError):
    """SLURM cannot be installed or started here (a reason to skip, not a failure)."""


def missing_binaries() -> list[str]:
    return [name for name in BINARIES if shutil.which(name) is None and not Path("/usr/sbin", name).exists()]


def ensure_installed(log=print) -> None:
    """Install Debian's SLURM and munge packages with apt when they are missing (root only)."""
    if not missing_binaries():
        return
    if os.geteuid() != 0:
        raise ClusterUnavailable(f"SLURM is not installed ({', '.join(missing_binaries())}) and this is not root")
    if shutil.which("apt-get") is None:
        raise ClusterUnavailable("SLURM is not installed and there is no apt-get to install it")
    log("installing " + " ".join(PACKAGES) + " with apt-get")
    failure = apt_install(list(PACKAGES))
    if failure:
        raise ClusterUnavailable(failure)
    if missing_binaries():
        raise ClusterUnavailable(f"apt installed SLURM but {', '.join(missing_binaries())} are still missing")


def _sbin(name: str) -> str:
    return shutil.which(name) or str(Path("/usr/sbin", name))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is not alive
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class LocalSlurm:
    """Start and stop the one-node cluster; ``state_dir`` holds spool, state, logs and PID files."""

    def __init__(self, state_dir: str | Path | None = None, *, cpus: int | None = None, mem_mb: int = 8000,
                 def_mem_per_cpu: int = 500, kill_wait: int = 5):
        self.state_dir = Path(state_dir or tempfile.mkdtemp(prefix="pgrpo-slurm-"))
        self.hostname = socket.gethostname().split(".")[0]
        self.cpus = cpus or os.cpu_count() or 1
        self.mem_mb = mem_mb
        self.def_mem_per_cpu = def_mem_per_cpu
        self.kill_wait = kill_wait
        self.started: dict[str, int] = {}  # daemon -> PID, only those this object started
        self.wrote_conf = False

    # ------------------------------------------------------------------------------------------------ config
    def slurm_conf(self) -> str:
        d = self.state_dir
        return "\n".join([
            MARKER,
            "ClusterName=pgrpo-test",
            f"SlurmctldHost={self.hostname}(127.0.0.1)",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            "MpiDefault=none",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SwitchType=switch/none",
            "SchedulerType=sched/backfill",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core_Memory",
            f"DefMemPerCPU={self.def_mem_per_cpu}",
            "GresTypes=gpu",
            "ReturnToService=2",
            "MinJobAge=600",
            f"KillWait={self.kill_wait}",
            "OverTimeLimit=0",
            "InactiveLimit=0",
            "Waittime=0",
            "SchedulerParameters=sched_interval=2",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            f"StateSaveLocation={d}/state",
            f"SlurmdSpoolDir={d}/spool",
            f"SlurmctldPidFile={d}/slurmctld.pid",
            f"SlurmdPidFile={d}/slurmd.pid",
            f"SlurmctldLogFile={d}/slurmctld.log",
            f"SlurmdLogFile={d}/slurmd.log",
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
            f"NodeName={self.hostname} NodeAddr=127.0.0.1 CPUs={self.cpus} RealMemory={self.mem_mb} Gres=gpu:1 "
            "State=UNKNOWN",
            f"PartitionName=cpu Nodes={self.hostname} Default=YES MaxTime=INFINITE State=UP",
            f"PartitionName=gpu Nodes={self.hostname} MaxTime=INFINITE State=UP",
            "",
        ])

    def gres_conf(self) -> str:
        return f"{MARKER}\nName=gpu Count=1 File=/dev/null\n"

    def _write_conf(self) -> None:
        for path in (SLURM_CONF, GRES_CONF):
            if path.exists() and MARKER not in path.read_text(errors="replace"):
                raise ClusterUnavailable(f"{path} exists and is not the tests' own: not overwriting a real cluster")
        SLURM_CONF.parent.mkdir(parents=True, exist_ok=True)
        SLURM_CONF.write_text(self.slurm_conf())
        GRES_CONF.write_text(self.gres_conf())
        self.wrote_conf = True

    # ------------------------------------------------------------------------------------------------ daemons
    def _start_munged(self) -> None:
        run = Path("/run/munge")
        pid = _read_pid(run / "munged.pid")
        if pid and _pid_alive(pid):
            return  # someone else's munged: use it, never stop it
        run.mkdir(parents=True, exist_ok=True)
        shutil.chown(run, "munge", "munge")
        os.chmod(run, 0o755)
        for sub in ("/var/lib/munge", "/var/log/munge"):
            Path(sub).mkdir(parents=True, exist_ok=True)
            shutil.chown(sub, "munge", "munge")
        if not Path("/etc/munge/munge.key").exists():
            subprocess.run(["runuser", "-u", "munge", "--", "mungekey", "--create"], check=True, timeout=60)
        subprocess.run(["runuser", "-u", "munge", "--", _sbin("munged")], check=True, timeout=60,
                       capture_output=True)
        self._wait(lambda: (_read_pid(run / "munged.pid") or 0) > 0, 10, "munged did not write its PID file")
        self.started["munged"] = _read_pid(run / "munged.pid")

    def _start_daemon(self, name: str, port: int) -> None:
        if not _port_free(port):
            raise ClusterUnavailable(f"port {port} is taken: another {name} may be running here")
        pid_file = self.state_dir / f"{name}.pid"
        args = [_sbin(name)]
        if name == "slurmctld":
            args.append("-c")  # clean start: no state from an earlier run
        result = subprocess.run(args, capture_output=True, text=True, timeout=60)
        if result.returncode != 0:
            raise RuntimeError(f"{name} did not start: {result.stderr[-2000:]}{self._log_tail(name)}")
        self._wait(lambda: (_read_pid(pid_file) or 0) > 0 and _pid_alive(_read_pid(pid_file)), 20,
                   f"{name} did not write its PID file")
        self.started[name] = _read_pid(pid_file)

    def start(self, timeout: float = 60) -> "LocalSlurm":
        ensure_installed()
        if os.geteuid() != 0:
            raise ClusterUnavailable("starting slurmctld and slurmd (and writing /etc/slurm) needs root")
        for sub in ("state", "spool"):
            (self.state_dir / sub).mkdir(parents=True, exist_ok=True)
        self._write_conf()
        try:
            self._start_munged()
            self._start_daemon("slurmctld", 6817)
            self._start_daemon("slurmd", 6818)
            self._wait(self._node_idle, timeout, "the node did not come up idle")
        except BaseException:
            self.stop()
            raise
        return self

    def _node_idle(self) -> bool:
        result = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], capture_output=True, text=True, timeout=10)
        states = result.stdout.split()  # one line per partition; idle* = not responding
        return result.returncode == 0 and bool(states) and all(state == "idle" for state in states)

    def _cancel_all_jobs(self, timeout: float = 30) -> None:
        """Cancel what is still queued or running (a failed or timed-out test): no job outlives the cluster."""
        def active() -> list[str]:
            result = subprocess.run(["squeue", "-h", "-o", "%i", "-t", "PENDING,RUNNING,COMPLETING,CONFIGURING"],
                                    capture_output=True, text=True, timeout=10)
            return result.stdout.split() if result.returncode == 0 else []

        jobs = active()
        if jobs:
            subprocess.run(["scancel", *jobs], capture_output=True, timeout=30)
            self._wait(lambda: not active(), timeout, "jobs still active after scancel")

    def stop(self) -> None:
        """Cancel the cluster's jobs, stop the daemons this object started, by PID, newest first; remove the config
        it wrote."""
        if "slurmctld" in self.started and _pid_alive(self.started["slurmctld"]):
            try:
                self._cancel_all_jobs(self.kill_wait + 30)
            except (RuntimeError, OSError, subprocess.SubprocessError):
                pass  # stopping the daemons below matters more
        for name in ("slurmd", "slurmctld", "munged"):
            pid = self.started.pop(name, None)
            if not pid or not _pid_alive(pid):
                continue
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and _pid_alive(pid):
                time.sleep(0.1)
            if _pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
        if self.wrote_conf:
            for path in (SLURM_CONF, GRES_CONF):
                if path.exists() and MARKER in path.read_text(errors="replace"):
                    path.unlink()
            self.wrote_conf = False

    # ------------------------------------------------------------------------------------------------ helpers
    def _log_tail(self, name: str, chars: int = 2000) -> str:
        path = self.state_dir / f"{name}.log"
        return f"\n--- {path} ---\n" + path.read_text(errors="replace")[-chars:] if path.exists() else ""

    def logs(self) -> str:
        return self._log_tail("slurmctld") + self._log_tail("slurmd")

    @staticmethod
    def _wait(predicate, timeout: float, message: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.2)
        raise RuntimeError(message)

    def __enter__(self) -> "LocalSlurm":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


if __name__ == "__main__":
    verb = sys.argv[1] if len(sys.argv) > 1 else "start"
    if verb == "install":
        ensure_installed()
    elif verb == "start":
        cluster = LocalSlurm(sys.argv[2] if len(sys.argv) > 2 else None).start()
        print(cluster.state_dir, cluster.started)
    elif verb == "stop":  # by the PID files of a state directory started above
        state = Path(sys.argv[2])
        for name in ("slurmd", "slurmctld"):
            pid = _read_pid(state / f"{name}.pid")
            if pid and _pid_alive(pid):
                os.kill(pid, signal.SIGTERM)
        for path in (SLURM_CONF, GRES_CONF):
            if path.exists() and MARKER in path.read_text(errors="replace"):
                path.unlink()
    else:
        sys.exit(f"usage: {sys.argv[0]} install|start [DIR]|stop DIR")
