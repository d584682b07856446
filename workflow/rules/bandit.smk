# Section 5.6: the exact softmax-bandit reduction (Figures 6 and 7) and a measured verdict on its claims.


rule bandit_calibrate:
    output:
        "results/bandit/calibration.json",
    log:
        "logs/bandit/calibrate.log",
    benchmark:
        "results/benchmarks/bandit_calibrate.tsv"
    conda:
        "../../envs/analysis.yaml"
    resources:
        runtime=10,
        mem_mb=attempt_mem(2000),
    params:
        code=code_version("bandit"),
        bandit=as_json("bandit"),
    shell:
        "PYTHONPATH=workflow python -m pgrpo bandit calibrate --section-json {params.bandit:q} --out {output} > {log} 2>&1"


rule bandit_sweep:
    input:
        "results/bandit/calibration.json",
    output:
        csv="results/bandit/figure6.csv",
        regimes="results/bandit/figure6_regimes.csv",
        pdf=report(
            "results/bandit/figure6.pdf",
            caption="../report/figure6.rst",
            category="5. Softmax bandit",
        ),
        png="results/bandit/figure6.png",
    log:
        "logs/bandit/sweep.log",
    benchmark:
        "results/benchmarks/bandit_sweep.tsv"
    conda:
        "../../envs/analysis.yaml"
    resources:
        runtime=10,
        mem_mb=attempt_mem(2000),
    params:
        code=code_version("bandit"),
        bandit=as_json("bandit"),
    shell:
        "PYTHONPATH=workflow python -m pgrpo bandit sweep --section-json {params.bandit:q} --calibration {input}"
        " --csv {output.csv} --regimes-csv {output.regimes} --pdf {output.pdf} --png {output.png} > {log} 2>&1"


rule bandit_regime_map:
    input:
        "results/bandit/calibration.json",
    output:
        csv="results/bandit/regime_map_{refresh}_{gradient}.csv",
        pdf=report(
            "results/bandit/figure7_{refresh}_{gradient}.pdf",
            caption="../report/figure7.rst",
            category="5. Softmax bandit",
        ),
        png="results/bandit/figure7_{refresh}_{gradient}.png",
    log:
        "logs/bandit/regime_map_{refresh}_{gradient}.log",
    benchmark:
        "results/benchmarks/bandit_regime_map_{refresh}_{gradient}.tsv"
    wildcard_constraints:
        refresh="sliding|periodic",
        gradient="importance_weighted|stale",
    conda:
        "../../envs/analysis.yaml"
    resources:
        runtime=20,
        mem_mb=attempt_mem(4000),
    params:
        code=code_version("bandit"),
        bandit=as_json("bandit"),
    shell:
        "PYTHONPATH=workflow python -m pgrpo bandit regime-map --section-json {params.bandit:q} --calibration {input}"
        " --refresh {wildcards.refresh} --gradient {wildcards.gradient}"
        " --csv {output.csv} --pdf {output.pdf} --png {output.png} > {log} 2>&1"


rule bandit_verdict:
    input:
        calibration="results/bandit/calibration.json",
        sweep="results/bandit/figure6_regimes.csv",
        sensitivity="results/bandit/sensitivity.csv",
        maps=regime_map_csvs(),
    output:
        md=report(
            "results/bandit/verdict.md",
            caption="../report/bandit_verdict.rst",
            category="5. Softmax bandit",
        ),
        table_csv="results/bandit/threshold_table.csv",
        table_md=report(
            "results/bandit/threshold_table.md",
            caption="../report/bandit_verdict.rst",
            category="5. Softmax bandit",
        ),
        table_tex="results/bandit/threshold_table.tex",
    log:
        "logs/bandit/verdict.log",
    benchmark:
        "results/benchmarks/bandit/verdict.tsv"
    conda:
        "../../envs/analysis.yaml"
    resources:
        runtime=10,
        mem_mb=attempt_mem(2000),
    params:
        code=code_version("bandit"),
        bandit=as_json("bandit"),
    shell:
        "PYTHONPATH=workflow python -m pgrpo bandit verdict --section-json {params.bandit:q} --calibration {input.calibration}"
        " --sweep-regimes {input.sweep} --sensitivity {input.sensitivity} --maps {input.maps} --md {output.md} --table-csv {output.table_csv}"
        " --table-md {output.table_md} --table-tex {output.table_tex} > {log} 2>&1"


rule bandit_sensitivity:
    output:
        csv="results/bandit/sensitivity.csv",
        md="results/bandit/sensitivity.md",
    log:
        "logs/bandit/sensitivity.log",
    benchmark:
        "results/benchmarks/bandit/sensitivity.tsv"
    conda:
        "../../envs/analysis.yaml"
    resources:
        runtime=10,
        mem_mb=attempt_mem(2000),
    params:
        code=code_version("bandit"),
        bandit=as_json("bandit"),
    shell:
        "PYTHONPATH=workflow python -m pgrpo bandit sensitivity --section-json {params.bandit:q}"
        " --csv {output.csv} --md {output.md} > {log} 2>&1"


rule bandit_finite_g:
    input:
        "results/bandit/calibration.json",
    output:
        md=report(
            "results/bandit/finite_g.md",
            caption="../report/finite_g.rst",
            category="7. Beyond the paper",
            subcategory="finite-G bandit",
        ),
        csv="results/bandit/finite_g.csv",
        png=report(
            "results/bandit/finite_g.png",
            caption="../report/finite_g.rst",
            category="7. Beyond the paper",
            subcategory="finite-G bandit",
        ),
        pdf="results/bandit/finite_g.pdf",
    log:
        "logs/bandit/finite_g.log",
    benchmark:
        "results/benchmarks/bandit_finite_g.tsv"
    conda:
        "../../envs/analysis.yaml"
    resources:
        runtime=30,
        mem_mb=attempt_mem(4000),
    params:
        code=code_version("bandit"),
        bandit=as_json("bandit"),
    shell:
        "PYTHONPATH=workflow python -m pgrpo bandit finite-g --section-json {params.bandit:q} --calibration {input}"
        " --md {output.md} --csv {output.csv} --png {output.png} --pdf {output.pdf} > {log} 2>&1"
