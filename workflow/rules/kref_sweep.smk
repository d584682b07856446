# Beyond the paper (Section 5.6, Scope): the deep-network K_ref sweep. One model trained at every
# (learning rate, K_ref); K measured on the baseline; each reward curve classified against Theorem 7.


rule kref_train:
    input:
        model=lambda wildcards: kref_sweep_model_inputs(),
        data=data_inputs,
    output:
        log="results/kref_sweep/runs/lr{lr}_kref{kref}/log.csv",
        meta="results/kref_sweep/runs/lr{lr}_kref{kref}/meta.json",
    log:
        "logs/kref_sweep/lr{lr}_kref{kref}.log",
    benchmark:
        "results/benchmarks/kref_sweep/lr{lr}_kref{kref}.tsv"
    wildcard_constraints:
        kref=r"\d+",
    conda:
        train_env("kref_sweep")
    threads: config["training"]["resources"]["threads"]
    resources:
        gpu=config["training"]["resources"]["gpus"],
        runtime=section_runtime("training"),
        mem_mb=attempt_mem(config["training"]["resources"]["mem_mb"]),
    params:
        model=lambda wildcards: json.dumps(
            model_spec(kref_sweep_model()), sort_keys=True
        ),
        data=as_json("data"),
        training=trajectory_json,
        bookkeeping=TRAINING_BOOKKEEPING_FILE,
        sweep=as_json("kref_sweep"),
        G=lambda wildcards: config["kref_sweep"].get("G") or config["group_sizes"][0],
        seed=lambda wildcards: config["kref_sweep"].get("seed") or config["seeds"][0],
        launcher=lambda wildcards, resources: train_launcher(resources.gpu),
        out_dir=lambda wildcards: kref_run_dir(wildcards.lr, wildcards.kref),
        prelude=kref_train_prelude,
    shell:
        "{params.prelude}OMP_NUM_THREADS={threads} PYTHONPATH=workflow {params.launcher} train --model-json {params.model:q}"
        " --data-json {params.data:q} --training-json {params.training:q} --bookkeeping-file {params.bookkeeping:q} --kref-sweep-json {params.sweep:q}"
        " --eta {wildcards.lr} --k-ref {wildcards.kref} --G {params.G} --seed {params.seed}"
        " --out-dir {params.out_dir} > {log} 2>&1"


rule kref_sweep:
    input:
        logs=[f"{kref_run_dir(lr, k)}/log.csv" for lr, k in kref_sweep_runs()],
        metas=[f"{kref_run_dir(lr, k)}/meta.json" for lr, k in kref_sweep_runs()],
    output:
        csv="results/kref_sweep/table.csv",
        md=report(
            "results/kref_sweep/table.md",
            caption="../report/kref_sweep.rst",
            category="7. Beyond the paper",
            subcategory="deep-network K_ref sweep",
        ),
        json="results/kref_sweep/summary.json",
        png=report(
            "results/kref_sweep/figure.png",
            caption="../report/kref_sweep.rst",
            category="7. Beyond the paper",
            subcategory="deep-network K_ref sweep",
        ),
        pdf="results/kref_sweep/figure.pdf",
    log:
        "logs/kref_sweep/sweep.log",
    conda:
        "../../envs/analysis.yaml"
    resources:
        runtime=10,
        mem_mb=2000,
    params:
        smoothing=config["kref_sweep"]["smoothing"],
        noise_multiple=config["kref_sweep"]["noise_multiple"],
    shell:
        "PYTHONPATH=workflow python -m pgrpo kref-sweep {input.logs} --metas {input.metas} --csv {output.csv}"
        " --md {output.md} --json {output.json} --png {output.png} --pdf {output.pdf}"
        " --smoothing {params.smoothing} --noise-multiple {params.noise_multiple} > {log} 2>&1"
