# The README's summary and the results pages ("The paper, reproduced", "Benchmarks") with their figures, read from
# this run's results: `pgrpo readme update README.md results/readme/summary.md` puts the block into the README and
# the pages, figures and facts into docs/; `pgrpo readme check` tests them.


rule readme_numbers:
    input:
        unpack(readme_inputs),
    output:
        md="results/readme/summary.md",
        json="results/readme/numbers.json",
        results="results/readme/results.md",
        benchmarks="results/readme/benchmarks.md",
        figures=directory("results/readme/figures"),
    log:
        "logs/readme_numbers.log",
    benchmark:
        "results/benchmarks/readme_numbers.tsv"
    conda:
        "../../envs/analysis.yaml"
    resources:
        runtime=10,
        mem_mb=attempt_mem(2000),
    params:
        code=code_version("readme"),
        flags=readme_flags,
    shell:
        "PYTHONPATH=workflow python -m pgrpo readme numbers {params.flags}"
        " --benchmarks-dir results/benchmarks --md {output.md} --json {output.json}"
        " --results-md {output.results} --benchmarks-md {output.benchmarks}"
        " --figures-dir {output.figures} > {log} 2>&1"
