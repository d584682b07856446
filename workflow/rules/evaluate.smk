# Section 4.3 / Table 1: pass@1 and pass@5 per benchmark, base model and every trained (G, seed) variant.


# Once per benchmark: read it (hub id, streamed where large, or a local path: then only validated and converted),
# drop what cannot be scored, sample max_examples with evaluation.seed; every evaluation job reads the result.
rule prepare_benchmark:
    input:
        lambda wildcards: benchmark_inputs(wildcards.benchmark),
    output:
        problems="results/data/benchmarks/{benchmark}.jsonl",
        meta="results/data/benchmarks/{benchmark}.meta.json",
    log:
        "logs/prepare_benchmark/{benchmark}.log",
    benchmark:
        "results/benchmarks/prepare_benchmark/{benchmark}.tsv"
    wildcard_constraints:
        benchmark=r"[^/]+",
    conda:
        "../../envs/evaluate.yaml"
    resources:
        runtime=120,
        mem_mb=attempt_mem(8000),
    params:
        benchmark=lambda wildcards: json.dumps(
            config["benchmarks"][wildcards.benchmark], sort_keys=True
        ),
        seed=config["evaluation"]["seed"],
        hub=lambda wildcards: hub_env(offline=False),  # offline cluster: on the login node, its cache
    shell:
        "{params.hub}PYTHONPATH=workflow python -m pgrpo prepare-benchmark --benchmark {wildcards.benchmark}"
        " --benchmark-json {params.benchmark:q} --seed {params.seed} --out {output.problems} > {log} 2>&1"


rule evaluate:
    input:
        model=lambda wildcards: (
            model_inputs(wildcards)
            if wildcards.variant == "base"
            else f"{variant_run_dir(wildcards)}/merged"
        ),
        prepared=lambda wildcards: prepared_benchmark(wildcards.benchmark),
    output:
        json="results/evaluate/{model}/{variant}/{benchmark}.json",
        samples="results/evaluate/{model}/{variant}/{benchmark}.samples.jsonl",
    log:
        "logs/evaluate/{model}/{variant}/{benchmark}.log",
    benchmark:
        "results/benchmarks/evaluate/{model}/{variant}/{benchmark}.tsv"
    wildcard_constraints:
        variant=r"base|G\d+_seed\d+",
    retries: job_retries("evaluation", "evaluate")
    conda:
        evaluate_env()
    threads: config["evaluation"]["resources"]["threads"]
    resources:
        gpu=config["evaluation"]["resources"]["gpus"],
        cpus_per_task=lambda wildcards, threads: threads,
        # an evaluation cannot resume: a retry gets more time and memory (retries:)
        runtime=evaluation_runtime,
        mem_mb=attempt_mem(config["evaluation"]["resources"]["mem_mb"]),
    params:
        model=lambda wildcards: json.dumps(model_spec(wildcards.model), sort_keys=True),
        benchmark=lambda wildcards: json.dumps(
            config["benchmarks"][wildcards.benchmark], sort_keys=True
        ),
        evaluation=as_json("evaluation"),
        variant_path=lambda wildcards: (
            ""
            if wildcards.variant == "base"
            else f"{variant_run_dir(wildcards)}/merged"
        ),
        prelude=evaluate_prelude,  # GPU jobs only: the exit-2 guard and pgrpo doctor
    shell:
        "{params.prelude}OMP_NUM_THREADS={threads} PYTHONPATH=workflow python -m pgrpo evaluate"
        " --model-json {params.model:q} --variant-path={params.variant_path:q}"
        " --benchmark {wildcards.benchmark} --benchmark-json {params.benchmark:q}"
        " --evaluation-json {params.evaluation:q} --prepared {input.prepared}"
        " --json {output.json} --samples {output.samples} > {log} 2>&1"


rule table1:
    input:
        evaluation_jsons(),
    output:
        csv="results/tables/table1.csv",
        md="results/tables/table1.md",
        tex="results/tables/table1.tex",
        html=report(
            "results/tables/table1.html",
            caption="../report/table1.rst",
            category="6. Out-of-distribution evaluation",
        ),
        summary="results/tables/table1_summary.csv",
    log:
        "logs/table1.log",
    benchmark:
        "results/benchmarks/table1.tsv"
    conda:
        "../../envs/evaluate.yaml"
    resources:
        runtime=10,
        mem_mb=attempt_mem(2000),
    params:
        code=code_version("table1"),
    shell:
        "PYTHONPATH=workflow python -m pgrpo table1 {input} --csv {output.csv} --md {output.md}"
        " --tex {output.tex} --html {output.html} --summary-csv {output.summary} > {log} 2>&1"


# pass@k for k = 1..num_samples of every evaluation (unbiased estimator, from the per-problem correct counts).
rule passk_curves:
    input:
        evaluation_jsons(),
    output:
        csv="results/tables/passk.csv",
        pdf="results/figures/passk.pdf",
        png=report(
            "results/figures/passk.png",
            caption="../report/passk.rst",
            category="6. Out-of-distribution evaluation",
        ),
    log:
        "logs/passk_curves.log",
    benchmark:
        "results/benchmarks/passk_curves.tsv"
    conda:
        "../../envs/evaluate.yaml"
    resources:
        runtime=10,
        mem_mb=attempt_mem(2000),
    params:
        code=code_version("passk-curves"),
    shell:
        "PYTHONPATH=workflow python -m pgrpo passk-curves {input} --csv {output.csv} --pdf {output.pdf}"
        " --png {output.png} > {log} 2>&1"
