"""Snakemake's own share of the cores (docs/performance.md, "Snakemake's own share of the cores").

Snakemake's job scheduler (9.27, ``snakemake/scheduling/job_scheduler.py``) ends every scheduling round that had
ready jobs with ``threading.Timer(timespan, release)`` (``--max-jobs-per-timespan``, default ``100/1s``), and every
job that finishes starts a round too: each finished job adds one more self-renewing timer, so after ``n`` jobs the
scheduler runs about ``n`` rounds per timespan while jobs wait for cores. Each round stats every input file of every
ready job (``update_input_sizes``), and the main job's corpus benchmarks read some 280 logs each. On the main job's
fresh run of session 31 the Snakemake process had used 1186 s of CPU after its first hour on 2 cores.

This script measures it on a toy workflow shaped like that: ``--short`` quick jobs, then ``--long`` jobs that sleep,
each reading ``--inputs`` files, on one core; it reports the Snakemake process's CPU seconds (user + system, its
children are ``sleep``) and the wall-clock, with Snakemake's default and with the setting of ``profiles/local``
(read from it), so a change of either is measured, not asserted.

    python benchmarks/bench_scheduler.py            # about 3 minutes, almost all of it sleeping
    python benchmarks/bench_scheduler.py --short 0  # the same without the finished jobs: no timers pile up
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]

SNAKEFILE = """
SHORT, LONG, INPUTS = {short}, {long}, {inputs}
rule all:
    input: expand("out/s{{i}}.txt", i=range(SHORT)), expand("out/l{{i}}.txt", i=range(LONG))
rule short:
    input: expand("data/f{{k}}.txt", k=range(INPUTS))
    output: "out/s{{i}}.txt"
    shell: "sleep 0.1; touch {{output}}"
rule long:
    input: expand("data/f{{k}}.txt", k=range(INPUTS)), expand("out/s{{i}}.txt", i=range(SHORT))
    output: "out/l{{i}}.txt"
    shell: "sleep {sleep}; touch {{output}}"
"""


def snakemake_bin() -> str:
    local = Path(sys.executable).with_name("snakemake")
    return str(local) if local.exists() else (shutil.which("snakemake") or "snakemake")


def run_once(folder: Path, extra: list[str]) -> tuple[float, float]:
    """(CPU seconds of the Snakemake process and its children, wall seconds) of one run from scratch."""
    for name in ("out", ".snakemake"):
        shutil.rmtree(folder / name, ignore_errors=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([snakemake_bin(), "--cores", "1", "--quiet", "all", *extra], cwd=folder, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--short", type=int, default=30, help="quick jobs that finish first (default 30)")
    parser.add_argument("--long", type=int, default=3, help="jobs that sleep after them (default 3)")
    parser.add_argument("--sleep", type=float, default=20.0, help="seconds each long job sleeps (default 20)")
    parser.add_argument("--inputs", type=int, default=300, help="input files of every job (default 300)")
    args = parser.parse_args(argv)
    profile = yaml.safe_load((ROOT / "profiles" / "local" / "config.yaml").read_text())
    setting = profile.get("max-jobs-per-timespan")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "data").mkdir()
        for k in range(args.inputs):
            (folder / "data" / f"f{k}.txt").write_text(str(k))
        (folder / "Snakefile").write_text(SNAKEFILE.format(short=args.short, long=args.long, inputs=args.inputs,
                                                           sleep=args.sleep))
        work = args.long * args.sleep + args.short * 0.1
        print(f"{args.short} quick jobs, then {args.long} jobs of {args.sleep:g} s, {args.inputs} inputs each, on one "
              f"core ({work:.0f} s of sleep in all)")
        runs = [("snakemake's default (100/1s)", [])]
        if setting:
            runs.append((f"profiles/local ({setting})", ["--max-jobs-per-timespan", str(setting)]))
        for name, extra in runs:
            cpu, wall = run_once(folder, extra)
            print(f"  {name:34s} Snakemake CPU {cpu:6.1f} s ({100 * cpu / wall:4.1f}% of one core)   wall {wall:6.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
