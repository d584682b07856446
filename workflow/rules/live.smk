# beyond the paper (issue 20): the live callback replayed over the planted and the labelled public logs, ours beside
# the post-training toolkit's live callback: detection latency, false stops, steps saved, reward lost


rule live_benchmark:
    input:
        labels=DIAGNOSE_BENCHMARK_LABELS,
        data=lambda wildcards: sorted(
            str(path) for path in Path("benchmarks/forecast/data").glob("*.json")
        ),
    output:
        csv="results/live_benchmark/table.csv",
        summary="results/live_benchmark/summary.json",
        md=report(
            "results/live_benchmark/table.md",
            caption="../report/live.rst",
            category="4. Diagnostics",
        ),
    log:
        "logs/live_benchmark.log",
    benchmark:
        "results/benchmarks/live_benchmark.tsv"
    conda:
        "../../envs/analysis.yaml"
    threads: config["benchmark_resources"]["threads"]
    resources:
        runtime=benchmark_runtime,
        mem_mb=attempt_mem(2000),
        cpus_per_task=lambda wildcards, threads: threads,
    shell:
        "PYTHONPATH=workflow python -m pgrpo live-benchmark --data-dir benchmarks/forecast/data"
        " --out results/live_benchmark --workers {threads} > {log} 2>&1"
