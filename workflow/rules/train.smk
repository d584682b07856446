# Section 4.2: GRPO per (model, G, seed) with TRL's GRPOTrainer and peft LoRA (Table 2), logged at every step.


rule train:
    input:
        model=model_inputs,
        data=data_inputs,
    output:
        log="results/train/{model}/G{G}/seed{seed}/log.csv",
        meta="results/train/{model}/G{G}/seed{seed}/meta.json",
        merged=directory("results/train/{model}/G{G}/seed{seed}/merged"),
    log:
        "logs/train/{model}/G{G}/seed{seed}.log",
    benchmark:
        "results/benchmarks/train/{model}/G{G}/seed{seed}.tsv"
    wildcard_constraints:
        G=r"\d+",
        seed=r"\d+",
    # runtime_min auto: the plan's estimate, capped at the partition limit; a longer run resumes from its last
    # checkpoint on each retry (pgrpo plan says how many submissions it takes)
    retries: job_retries("training", "train")
    conda:
        train_env()
    threads: config["training"]["resources"]["threads"]
    resources:
        gpu=config["training"]["resources"]["gpus"],
        cpus_per_task=lambda wildcards, threads: threads,
        runtime=lambda wildcards: job_runtime("training", train_job(wildcards)),
        # a retry resumes from its checkpoint, so its runtime stays; its memory grows (retries.mem_factor)
        mem_mb=attempt_mem(training_mem_mb()),
    params:
        model=lambda wildcards: json.dumps(model_spec(wildcards.model), sort_keys=True),
        data=as_json("data"),
        training=trajectory_json,
        bookkeeping=TRAINING_BOOKKEEPING_FILE,
        launcher=lambda wildcards, resources: train_launcher(resources.gpu),
        out_dir=lambda wildcards: run_dir(wildcards.model, wildcards.G, wildcards.seed),
        prelude=train_prelude,  # GPU jobs only: the exit-2 guard and pgrpo doctor
    shell:
        "{params.prelude}OMP_NUM_THREADS={threads} PYTHONPATH=workflow {params.launcher} train --model-json {params.model:q} --data-json {params.data:q}"
        " --training-json {params.training:q} --bookkeeping-file {params.bookkeeping:q} --G {wildcards.G} --seed {wildcards.seed}"
        " --out-dir {params.out_dir} > {log} 2>&1"
