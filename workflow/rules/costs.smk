# Where the main job's time goes (issue 24): job-seconds per job and per rule, their shares and the critical path
# through the DAG, from every job's benchmark file. The DAG's jobs (rule, benchmark file, inputs, outputs) are
# written when a run starts (onstart, after Snakemake built the DAG), so rule job_costs reads no file that a job
# writes after its own inputs: it waits for every target and never makes itself stale.
from pgrpo.stages.job_costs import (
    rule_patterns,
    workflow_cores,
    write_job_graph,
)  # noqa: E402

JOB_GRAPH = "results/costs/job_graph.json"
JOB_COSTS = "results/costs/summary.json"


# Snakemake keeps one onstart handler (the last one read): this one runs the workflow's other start-up hooks too.
onstart:
    check_executor_plugin()
    clear_input_errors()
    needrun = set(workflow.dag.needrun_jobs(exclude_finished=False))
    write_job_graph(
        (
            {
                "rule": job.rule.name,
                "benchmark": job.benchmark,
                "inputs": list(job.input),
                "outputs": list(job.output),
                "needrun": job in needrun,
            }
            for job in workflow.dag.jobs
        ),
        JOB_GRAPH,
        cores=workflow_cores(workflow),
        rules=rule_patterns(workflow.rules),
    )


localrules:
    job_costs,


# Every target but the README's summary, which quotes this table's totals (so the table comes before it).
rule job_costs:
    input:
        all_targets(readme=False),
    output:
        md=report(
            "results/costs/job_costs.md",
            caption="../report/job_costs.rst",
            category="8. Costs",
        ),
        csv="results/costs/job_costs.csv",
        json=JOB_COSTS,
    log:
        "logs/job_costs.log",
    benchmark:
        "results/benchmarks/job_costs.tsv"
    localrule: True
    # the planned column reads the plan, which reads model configs through the training stack
    conda:
        train_env()
    resources:
        runtime=5,
        mem_mb=attempt_mem(1000),
    params:
        code=code_version("job-costs"),
        graph=JOB_GRAPH,
        # the config file of this run, for pgrpo plan's column (the embedded default unless --configfile names one)
        config=lambda wildcards: ([*workflow.configfiles] or ["config/config.yaml"])[-1],
    shell:
        "PYTHONPATH=workflow python -m pgrpo job-costs --graph {params.graph} --benchmarks-dir results/benchmarks"
        " --config {params.config} --md {output.md} --csv {output.csv} --json {output.json} > {log} 2>&1"
