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
    params:
        code=code_version("live-benchmark"),
    shell:
        "PYTHONPATH=workflow python -m pgrpo live-benchmark --data-dir benchmarks/forecast/data"
        " --out results/live_benchmark --workers {threads} > {log} 2>&1"


# every run's live reads (issue 20): the callback rule train attached, replayed over the run's log as pgrpo replay
# does (the same reads, stop rules and settings), drawn for the report beside the run's own live.json
rule live_replay:
    input:
        log="results/train/{model}/G{G}/seed{seed}/log.csv",
        meta="results/train/{model}/G{G}/seed{seed}/meta.json",
    output:
        json="results/live/{model}/G{G}/seed{seed}.json",
        png=report(
            "results/live/{model}/G{G}/seed{seed}.png",
            caption="../report/live_replay.rst",
            category="4. Diagnostics",
            subcategory="live reads",
            labels={"model": "{model}", "G": "{G}", "seed": "{seed}"},
        ),
    log:
        "logs/live/{model}/G{G}/seed{seed}.log",
    benchmark:
        "results/benchmarks/live/{model}/G{G}/seed{seed}.tsv"
    wildcard_constraints:
        G=r"\d+",
        seed=r"\d+",
    conda:
        "../../envs/analysis.yaml"
    resources:
        runtime=10,
        mem_mb=attempt_mem(2000),
    params:
        code=code_version("replay"),
        flags=live_replay_flags(config["training"]),
    shell:
        "PYTHONPATH=workflow python -m pgrpo replay {input.log} --meta {input.meta} {params.flags}"
        " --json {output.json} --png {output.png} --quiet > {log} 2>&1"
