# Section 4.3 / Table 1: pass@1 and pass@5 per benchmark, base model and every trained (G, seed) variant.


rule evaluate:
    input:
        model=lambda wildcards: (
            model_inputs(wildcards)
            if wildcards.variant == "base"
            else f"{variant_run_dir(wildcards)}/merged"
        ),
        benchmark=lambda wildcards: benchmark_inputs(wildcards.benchmark),
    output:
        json="results/evaluate/{model}/{variant}/{benchmark}.json",
        samples="results/evaluate/{model}/{variant}/{benchmark}.samples.jsonl",
    log:
        "logs/evaluate/{model}/{variant}/{benchmark}.log",
    benchmark:
        "results/benchmarks/evaluate/{model}/{variant}/{benchmark}.tsv"
    wildcard_constraints:
        variant=r"base|G\d+_seed\d+",
    conda:
        "../../envs/evaluate.yaml"
    threads: config["evaluation"]["resources"]["threads"]
    resources:
        gpu=config["evaluation"]["resources"]["gpus"],
        runtime=config["evaluation"]["resources"]["runtime_min"],
        mem_mb=config["evaluation"]["resources"]["mem_mb"],
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
    shell:
        "OMP_NUM_THREADS={threads} PYTHONPATH=workflow python -m pgrpo evaluate"
        " --model-json {params.model:q} --variant-path={params.variant_path:q}"
        " --benchmark {wildcards.benchmark} --benchmark-json {params.benchmark:q}"
        " --evaluation-json {params.evaluation:q} --json {output.json} --samples {output.samples}"
        " > {log} 2>&1"


rule table1:
    input:
        evaluation_jsons(),
    output:
        csv="results/tables/table1.csv",
        md=report(
            "results/tables/table1.md",
            caption="../report/table1.rst",
            category="6. Out-of-distribution evaluation",
        ),
        tex="results/tables/table1.tex",
    log:
        "logs/table1.log",
    conda:
        "../../envs/analysis.yaml"
    resources:
        runtime=10,
        mem_mb=2000,
    shell:
        "PYTHONPATH=workflow python -m pgrpo table1 {input} --csv {output.csv} --md {output.md}"
        " --tex {output.tex} > {log} 2>&1"
