r"""Seconds for `snakemake -n --profile slurm` to build the DAG of a grid ``--scale`` times the paper's.

    python benchmarks/bench_dryrun.py [--scale 10] [--repeats 3]     (make bench-dryrun)

The grid is config/paper.yaml with its three models copied ``--scale`` times (so 12 x scale trainings and
120 x scale evaluations: one per (model, variant, benchmark)). Each repeat runs the dry run in a fresh copy of the
workflow (no .snakemake state) through the shipped slurm/ profile, with env-modules in place of conda so that it
runs where conda is absent (no rule has an `envmodules:` directive). Prints the job counts and the seconds of
each repeat, then the median. A script, not a test: nothing is asserted about speed.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def grid(scale: int) -> dict:
    with open(REPO / "config" / "paper.yaml") as handle:
        config = yaml.safe_load(handle)
    config["models"] = {
        (name if copy == 0 else f"{name}-copy{copy}"): spec
        for copy in range(scale)
        for name, spec in config["models"].items()
    }
    return config


def job_counts(text: str) -> dict[str, int]:
    """The `Job stats` table of a dry run: rule -> count."""
    counts, in_table = {}, False
    for line in text.splitlines():
        if line.startswith("job ") and "count" in line:
            in_table = True
            continue
        if in_table:
            parts = line.split()
            if len(parts) == 2 and parts[1].isdigit():
                counts[parts[0]] = int(parts[1])
            elif counts:
                break
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=int, default=10, help="copies of the paper's models (default 10)")
    parser.add_argument("--repeats", type=int, default=3)
    options = parser.parse_args()

    snakemake = shutil.which("snakemake") or str(Path(sys.executable).parent / "snakemake")
    with open(REPO / "slurm" / "config.yaml") as handle:
        profile = yaml.safe_load(handle)
    profile["software-deployment-method"] = "env-modules"
    seconds = []
    for repeat in range(options.repeats):
        with tempfile.TemporaryDirectory(prefix="bench_dryrun.") as tmp:
            work = Path(tmp)
            for item in ("Snakefile", "workflow", "config", "envs"):
                source = REPO / item
                (shutil.copytree if source.is_dir() else shutil.copy)(source, work / item)
            (work / "grid.yaml").write_text(yaml.safe_dump(grid(options.scale)))
            (work / "profile").mkdir()
            (work / "profile" / "config.yaml").write_text(yaml.safe_dump(profile))
            started = time.perf_counter()
            result = subprocess.run([snakemake, "-n", "--quiet", "rules", "--profile", "profile",
                                     "--configfile", "grid.yaml"], cwd=work, capture_output=True, text=True)
            seconds.append(time.perf_counter() - started)
        if result.returncode != 0:
            sys.exit(result.stderr[-3000:])
        counts = job_counts(result.stdout + result.stderr)
        if repeat == 0:
            print(f"grid x{options.scale}: train={counts.get('train')} evaluate={counts.get('evaluate')} "
                  f"total={counts.get('total')}")
        print(f"repeat {repeat + 1}: {seconds[-1]:.2f} s")
    print(f"median {statistics.median(seconds):.2f} s over {options.repeats} dry run(s)")


if __name__ == "__main__":
    main()
