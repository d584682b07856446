# Cluster runs (docs/cluster.md): with cluster.offline, rule prefetch fetches every model and dataset into
# cluster.hf_home on the login node before any job that loads one (its manifest is their input), and the small rules
# that only read results run on the login node too instead of one sbatch job each.


rule prefetch:
    output:
        manifest=PREFETCH_MANIFEST,
    log:
        "logs/prefetch.log",
    benchmark:
        "results/benchmarks/prefetch.tsv"
    conda:
        "../../envs/evaluate.yaml"
    resources:
        runtime=120,
        mem_mb=attempt_mem(8000),
    params:
        fetch=lambda wildcards: json.dumps(prefetch_items(), sort_keys=True),
        hub=lambda wildcards: hub_env(offline=False),
    shell:
        "{params.hub}PYTHONPATH=workflow python -m pgrpo prefetch --items-json {params.fetch:q}"
        " --manifest {output.manifest} > {log} 2>&1"


# On the login node under --profile slurm: the fetch (it needs the network) and the rules that read finished results
# (seconds each). train, evaluate and the rest are submitted.
localrules:
    prefetch,
    aggregate_seeds,
    fit_laws,
    figure1,
    forecast_run,
    forecast_summary,
    live_replay,
    diagnostics,
    table1,
    passk_curves,
    readme_numbers,
    bandit_verdict,
    bandit_sensitivity,
    kref_sweep,


# Offline compute nodes: each benchmark is read on the login node (it streams only the split it samples; datasets
# cannot stream from its cache offline), and the evaluation jobs read its prepared file.
if cluster_offline():

    localrules:
        prepare_benchmark,
