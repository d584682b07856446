# Section 4.4 / Figure 1: the three-phase law (Prop. 14) and its rivals on the seed means; forecasts.


rule fit_laws:
    input:
        aggregates=lambda wildcards: expand(
            "results/aggregate/{model}/G{G}.csv",
            model=wildcards.model,
            G=config["group_sizes"],
        ),
        metas=lambda wildcards: [
            f"{run_dir(model, G, seed)}/meta.json"
            for model, G, seed in runs()
            if model == wildcards.model
        ],
    output:
        json="results/fit/{model}/fits.json",
        csv="results/fit/{model}/fits.csv",
        md=report(
            "results/fit/{model}/fits.md",
            caption="../report/fits.rst",
            category="2. Training dynamics",
        ),
        tex="results/fit/{model}/fits.tex",
    log:
        "logs/fit/{model}.log",
    benchmark:
        "results/benchmarks/fit/{model}.tsv"
    conda:
        "../../envs/analysis.yaml"
    resources:
        runtime=10,
        mem_mb=attempt_mem(2000),
    params:
        code=code_version("fit"),
        fitting=as_json("fitting"),
    shell:
        "PYTHONPATH=workflow python -m pgrpo fit --section-json {params.fitting:q} --aggregates {input.aggregates}"
        " --metas {input.metas} --json {output.json} --csv {output.csv} --md {output.md}"
        " --tex {output.tex} > {log} 2>&1"


rule figure1:
    input:
        aggregates=expand(
            "results/aggregate/{model}/G{G}.csv",
            model=config["models"],
            G=config["group_sizes"],
        ),
        fits=expand("results/fit/{model}/fits.json", model=config["models"]),
    output:
        pdf=report(
            "results/figures/figure1.pdf",
            caption="../report/figure1.rst",
            category="2. Training dynamics",
        ),
        png="results/figures/figure1.png",
    log:
        "logs/figure1.log",
    benchmark:
        "results/benchmarks/figure1.tsv"
    conda:
        "../../envs/analysis.yaml"
    resources:
        runtime=10,
        mem_mb=attempt_mem(2000),
    params:
        code=code_version("figure1"),
    shell:
        "PYTHONPATH=workflow python -m pgrpo figure1 --aggregates {input.aggregates} --fits {input.fits}"
        " --pdf {output.pdf} --png {output.png} > {log} 2>&1"


rule forecast_run:
    input:
        log="results/train/{model}/G{G}/seed{seed}/log.csv",
        meta="results/train/{model}/G{G}/seed{seed}/meta.json",
    output:
        json="results/forecast/{model}/G{G}/seed{seed}.json",
        png="results/forecast/{model}/G{G}/seed{seed}.png",
    log:
        "logs/forecast/{model}/G{G}/seed{seed}.log",
    benchmark:
        "results/benchmarks/forecast/{model}/G{G}/seed{seed}.tsv"
    wildcard_constraints:
        G=r"\d+",
        seed=r"\d+",
    conda:
        "../../envs/analysis.yaml"
    resources:
        runtime=10,
        mem_mb=attempt_mem(2000),
    params:
        code=code_version("forecast"),
        fitting=as_json("fitting"),
    shell:
        "PYTHONPATH=workflow python -m pgrpo forecast {input.log} --meta {input.meta} --section-json {params.fitting:q}"
        " --json {output.json} --png {output.png} > {log} 2>&1"


rule forecast_summary:
    input:
        [f"results/forecast/{model}/G{G}/seed{seed}.json" for model, G, seed in runs()],
    output:
        csv="results/forecast/summary.csv",
        md=report(
            "results/forecast/summary.md",
            caption="../report/forecast.rst",
            category="3. Forecast",
        ),
    log:
        "logs/forecast/summary.log",
    benchmark:
        "results/benchmarks/forecast/summary.tsv"
    conda:
        "../../envs/analysis.yaml"
    resources:
        runtime=10,
        mem_mb=attempt_mem(2000),
    params:
        code=code_version("forecast-summary"),
    shell:
        "PYTHONPATH=workflow python -m pgrpo forecast-summary {input} --csv {output.csv} --md {output.md} > {log} 2>&1"


rule forecast_benchmark:
    input:
        data=lambda wildcards: sorted(
            str(path)
            for path in Path(
                config["forecast_benchmark"].get(
                    "data_dir", "benchmarks/forecast/data"
                )
            ).glob("*.json")
        ),
        logs=[f"{run_dir(model, G, seed)}/log.csv" for model, G, seed in runs()],
        kref=kref_sweep_logs,
    output:
        csv="results/forecast/benchmark.csv",
        md=report(
            "results/forecast/benchmark.md",
            caption="../report/forecast_benchmark.rst",
            category="3. Forecast",
        ),
        png=report(
            "results/forecast/benchmark.png",
            caption="../report/forecast_benchmark.rst",
            category="3. Forecast",
        ),
    log:
        "logs/forecast/benchmark.log",
    benchmark:
        "results/benchmarks/forecast_benchmark.tsv"
    conda:
        "../../envs/analysis.yaml"
    threads: config["benchmark_resources"]["threads"]
    resources:
        runtime=benchmark_runtime,
        mem_mb=attempt_mem(4000),
        cpus_per_task=lambda wildcards, threads: threads,
    params:
        code=code_version("forecast-benchmark"),
        section=as_json("forecast_benchmark"),
    shell:
        "PYTHONPATH=workflow python -m pgrpo forecast-benchmark --section-json {params.section:q} --workers {threads}"
        " --logs {input.logs} --kref-logs {input.kref} --csv {output.csv} --md {output.md} --png {output.png}"
        " > {log} 2>&1"
