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
        figures=expand(
            "results/diagnostics/figure{n}.{ext}", n=[2, 3, 4, 5], ext=["pdf", "png"]
        ),
    log:
        "logs/diagnostics.log",
    conda:
        "../../envs/analysis.yaml"
    resources:
        runtime=10,
        mem_mb=2000,
    params:
        diagnostics=as_json("diagnostics"),
    shell:
        "PYTHONPATH=workflow python -m pgrpo diagnostics --section-json {params.diagnostics:q}"
        " --aggregates {input.aggregates} --fits {input.fits} --metas {input.metas}"
        " --json {output.json} --md {output.md} --figures results/diagnostics > {log} 2>&1"
