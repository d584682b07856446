# Section 4.2: seeds aligned by step -> mean and s.d. of every logged quantity, per (model, G).


rule aggregate_seeds:
    input:
        lambda wildcards: expand(
            "results/train/{model}/G{G}/seed{seed}/log.csv",
            model=wildcards.model,
            G=wildcards.G,
            seed=config["seeds"],
        ),
    output:
        "results/aggregate/{model}/G{G}.csv",
    log:
        "logs/aggregate/{model}/G{G}.log",
    benchmark:
        "results/benchmarks/aggregate/{model}/G{G}.tsv"
    wildcard_constraints:
        G=r"\d+",
    conda:
        "../../envs/analysis.yaml"
    resources:
        runtime=10,
        mem_mb=attempt_mem(2000),
    params:
        code=code_version("aggregate"),
    shell:
        "PYTHONPATH=workflow python -m pgrpo aggregate {input} --out {output} > {log} 2>&1"
