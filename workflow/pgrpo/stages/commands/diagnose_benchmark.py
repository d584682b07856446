"""``pgrpo diagnose-benchmark``: ``pgrpo diagnose`` against the post-training toolkit's rules on labelled logs
(:mod:`pgrpo.stages.diagnose_benchmark`)."""

from __future__ import annotations

import sys

from pgrpo.stages.commands import BENCHMARKS, Commands


def add_commands(commands: Commands) -> None:
    p = commands.add("diagnose-benchmark", BENCHMARKS, "pgrpo diagnose (ours vs the post-training toolkit's rules) "
                     "on the planted and the labelled public logs", _diagnose_benchmark)
    p.add_argument("--data-dir", default="benchmarks/forecast/data",
                   help="labelled public TRL logs (labels.json; batches.json: the blind batch, scored apart)")
    p.add_argument("--out", required=True, help="folder for table.md, table.csv, summary.csv, verdicts/")


def _diagnose_benchmark(args):
    from tqdm import tqdm

    from pgrpo.stages import diagnose_benchmark

    with tqdm(desc="diagnose benchmark", unit="log", file=sys.stderr) as bar:
        result = diagnose_benchmark.run_diagnose_benchmark(args.out, args.data_dir, progress=lambda _: bar.update())
    print(f"pgrpo diagnose-benchmark: {sum(result['logs_per_split'].values())} logs -> {args.out}/table.md")
