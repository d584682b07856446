# The README's numbers ("What the embedded default shows"), read from this run's results: `pgrpo readme update
# README.md results/readme/summary.md` puts the block into the README, `pgrpo readme check` tests it.


rule readme_numbers:
    input:
        unpack(readme_inputs),
    output:
        md="results/readme/summary.md",
        json="results/readme/numbers.json",
    log:
        "logs/readme_numbers.log",
    conda:
        "../../envs/analysis.yaml"
    resources:
        runtime=10,
        mem_mb=2000,
    params:
        flags=readme_flags,
    shell:
        "PYTHONPATH=workflow python -m pgrpo readme numbers {params.flags}"
        " --benchmarks-dir results/benchmarks --md {output.md} --json {output.json} > {log} 2>&1"
