# Beyond the paper (Section 5.6, Scope): the deep-network K_ref sweep, per optimizer arm (heavy-ball SGD, the map (3)
# of Theorem 7; Adam against its measured effective step). Each arm's baseline measures K; the checkpoint kref_grid
# chooses the (learning rate, K_ref) grid from it (none when K is not measured); each run is classified against
# Theorem 7.


rule kref_train:
    input:
        model=lambda wildcards: kref_sweep_model_inputs(),
        data=data_inputs,
    output:
        log="results/kref_sweep/{arm}/{run}/log.csv",
        meta="results/kref_sweep/{arm}/{run}/meta.json",
    log:
        "logs/kref_sweep/{arm}/{run}.log",
    benchmark:
        "results/benchmarks/kref_sweep/{arm}/{run}.tsv"
    wildcard_constraints:
        arm="sgd|adam",
        run=r"baseline|lr[0-9.e+-]+_kref\d+",
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
        sweep=kref_arm_sweep_json,
        run=kref_run_args,
        G=lambda wildcards: config["kref_sweep"].get("G") or config["group_sizes"][0],
        seed=lambda wildcards: config["kref_sweep"].get("seed") or config["seeds"][0],
        launcher=lambda wildcards, resources: train_launcher(resources.gpu),
        out_dir=lambda wildcards: f"results/kref_sweep/{wildcards.arm}/{wildcards.run}",
        prelude=kref_train_prelude,
    shell:
        "{params.prelude}OMP_NUM_THREADS={threads} PYTHONPATH=workflow {params.launcher} train --model-json {params.model:q}"
        " --data-json {params.data:q} --training-json {params.training:q} --bookkeeping-file {params.bookkeeping:q} --kref-sweep-json {params.sweep:q}"
        " {params.run} --G {params.G} --seed {params.seed}"
        " --out-dir {params.out_dir} > {log} 2>&1"


checkpoint kref_grid:
    input:
        log="results/kref_sweep/{arm}/baseline/log.csv",
        meta="results/kref_sweep/{arm}/baseline/meta.json",
    output:
        "results/kref_sweep/{arm}/grid.json",
    log:
        "logs/kref_sweep/{arm}/grid.log",
    benchmark:
        "results/benchmarks/kref_sweep/{arm}/grid.tsv"
    wildcard_constraints:
        arm="sgd|adam",
    conda:
        "../../envs/analysis.yaml"
    resources:
        runtime=10,
        mem_mb=attempt_mem(2000),
    params:
        sweep=as_json("kref_sweep"),
    shell:
        "PYTHONPATH=workflow python -m pgrpo kref-grid --arm {wildcards.arm} --log {input.log} --meta {input.meta}"
        " --out {output} --kref-sweep-json {params.sweep:q} > {log} 2>&1"


rule kref_sweep:
    input:
        grids=[f"results/kref_sweep/{arm}/grid.json" for arm in kref_sweep_arms()],
        logs=kref_grid_logs,
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
        arms=[
            f"results/kref_sweep/{arm}/{name}"
            for arm in kref_sweep_arms()
            for name in ("table.md", "table.csv", "summary.json")
        ],
    log:
        "logs/kref_sweep/sweep.log",
    benchmark:
        "results/benchmarks/kref_sweep/sweep.tsv"
    conda:
        "../../envs/analysis.yaml"
    resources:
        runtime=10,
        mem_mb=attempt_mem(2000),
    params:
        code=code_version("kref-sweep"),
        smoothing=config["kref_sweep"]["smoothing"],
        noise_multiple=config["kref_sweep"]["noise_multiple"],
    shell:
        "PYTHONPATH=workflow python -m pgrpo kref-sweep {input.grids} --csv {output.csv}"
        " --md {output.md} --json {output.json} --png {output.png} --pdf {output.pdf}"
        " --benchmarks-dir results/benchmarks/kref_sweep"
        " --smoothing {params.smoothing} --noise-multiple {params.noise_multiple} > {log} 2>&1"
