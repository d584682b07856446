# Sections 5.2-5.5 / Figures 2-5: reward hacking, mode collapse, policy concentration, stability; with verdicts.


rule diagnostics:
    input:
        aggregates=expand(
            "results/aggregate/{model}/G{G}.csv",
            model=config["models"],
            G=config["group_sizes"],
        ),
        fits=expand("results/fit/{model}/fits.json", model=config["models"]),
        metas=[f"{run_dir(model, G, seed)}/meta.json" for model, G, seed in runs()],
    output:
        json="results/diagnostics/verdicts.json",
        md=report(
            "results/diagnostics/verdicts.md",
            caption="../report/diagnostics.rst",
            category="4. Diagnostics",
        ),
        figure2=report(
            "results/diagnostics/figure2.pdf",
            caption="../report/diagnostics.rst",
            category="4. Diagnostics",
            subcategory="reward hacking",
        ),
        figure2_png="results/diagnostics/figure2.png",
        figure3=report(
            "results/diagnostics/figure3.pdf",
            caption="../report/diagnostics.rst",
            category="4. Diagnostics",
            subcategory="mode collapse",
        ),
        figure3_png="results/diagnostics/figure3.png",
        figure4=report(
            "results/diagnostics/figure4.pdf",
            caption="../report/diagnostics.rst",
            category="4. Diagnostics",
            subcategory="policy concentration",
        ),
        figure4_png="results/diagnostics/figure4.png",
        figure5=report(
            "results/diagnostics/figure5.pdf",
            caption="../report/diagnostics.rst",
            category="4. Diagnostics",
            subcategory="stability",
        ),
        figure5_png="results/diagnostics/figure5.png",
    log:
        "logs/diagnostics.log",
    benchmark:
        "results/benchmarks/diagnostics.tsv"
    conda:
        "../../envs/analysis.yaml"
    resources:
        runtime=10,
        mem_mb=attempt_mem(2000),
    params:
        code=code_version("diagnostics"),
        diagnostics=as_json("diagnostics"),
    shell:
        "PYTHONPATH=workflow python -m pgrpo diagnostics --section-json {params.diagnostics:q}"
        " --aggregates {input.aggregates} --fits {input.fits} --metas {input.metas}"
        " --json {output.json} --md {output.md} --figures results/diagnostics > {log} 2>&1"


# beyond the paper: pgrpo diagnose (ours vs the post-training toolkit's rules) on planted and labelled public logs
rule diagnose_benchmark:
    input:
        labels=DIAGNOSE_BENCHMARK_LABELS,
        # the labels of oscillation, length_collapse and length_hacking, with their reasons (merged by the stage)
        extra_labels="benchmarks/diagnose/labels_new_modes.json",
        data=lambda wildcards: sorted(
            str(path) for path in Path("benchmarks/forecast/data").glob("*.json")
        ),
    output:
        csv="results/diagnose_benchmark/table.csv",
        summary="results/diagnose_benchmark/summary.csv",
        md=report(
            "results/diagnose_benchmark/table.md",
            caption="../report/diagnose_benchmark.rst",
            category="4. Diagnostics",
        ),
    log:
        "logs/diagnose_benchmark.log",
    benchmark:
        "results/benchmarks/diagnose_benchmark.tsv"
    conda:
        "../../envs/analysis.yaml"
    resources:
        runtime=10,
        mem_mb=attempt_mem(2000),
    params:
        code=code_version("diagnose-benchmark"),
    shell:
        "PYTHONPATH=workflow python -m pgrpo diagnose-benchmark --data-dir benchmarks/forecast/data"
        " --out results/diagnose_benchmark > {log} 2>&1"
