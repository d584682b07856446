# Appendix A: sympy derives every closed form of Section 3 and compares it with the paper's expression.


rule verify_symbolic:
    output:
        json="results/symbolic/verification.json",
        md=report(
            "results/symbolic/verification.md",
            caption="../report/symbolic.rst",
            category="1. Symbolic verification",
        ),
    log:
        "logs/verify_symbolic.log",
    benchmark:
        "results/benchmarks/verify_symbolic.tsv"
    conda:
        "../../envs/symbolic.yaml"
    resources:
        runtime=10,
        mem_mb=attempt_mem(2000),
    params:
        code=code_version("symbolic"),
    shell:
        "PYTHONPATH=workflow python -m pgrpo symbolic --json {output.json} --md {output.md} > {log} 2>&1"
