# Section 4.2: GRPO per (model, G, seed) with TRL's GRPOTrainer and peft LoRA (Table 2), logged at every step.


rule train:
    input:
        model=model_inputs,
        data=data_inputs,
    output:
        log=train_log_output(),
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
        # SIGURG before the limit, as long before as the plan says a checkpoint and an evaluation can take
        slurm_extra=train_signal_extra,
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


# training.eval_mode: checkpoints: the held-out evaluation of each saved step as a job of its own (at its own batch),
# then the run's log.csv joined from train_log.csv and those rows, as an inline run writes it
if EVAL_IN_JOBS:

    localrules:
        join_evaluations,

    rule evaluate_checkpoint:
        input:
            train_log="results/train/{model}/G{G}/seed{seed}/train_log.csv",
            model=model_inputs,
            data=data_inputs,
        output:
            "results/train/{model}/G{G}/seed{seed}/evals/step{step}.json",
        log:
            "logs/train/{model}/G{G}/seed{seed}/evals/step{step}.log",
        benchmark:
            "results/benchmarks/train_eval/{model}/G{G}/seed{seed}/step{step}.tsv"
        wildcard_constraints:
            G=r"\d+",
            seed=r"\d+",
            step=r"\d+",
        conda:
            train_env()
        threads: config["training"]["resources"]["threads"]
        resources:
            gpu=min(1, int(config["training"]["resources"]["gpus"] or 0)),
            cpus_per_task=lambda wildcards, threads: threads,
            runtime=eval_job_runtime,
            mem_mb=attempt_mem(config["training"]["resources"]["mem_mb"]),
        params:
            model=lambda wildcards: json.dumps(
                model_spec(wildcards.model), sort_keys=True
            ),
            data=as_json("data"),
            training=trajectory_json,
            bookkeeping=TRAINING_BOOKKEEPING_FILE,
            run_dir=lambda wildcards: run_dir(
                wildcards.model, wildcards.G, wildcards.seed
            ),
            # GPU jobs only: the exit-2 guard, pgrpo doctor and the offline cache
            prelude=evaluate_checkpoint_prelude,
        shell:
            "{params.prelude}OMP_NUM_THREADS={threads} PYTHONPATH=workflow python -m pgrpo evaluate-checkpoint --model-json {params.model:q}"
            " --data-json {params.data:q} --training-json {params.training:q} --bookkeeping-file {params.bookkeeping:q}"
            " --G {wildcards.G} --seed {wildcards.seed} --run-dir {params.run_dir} --step {wildcards.step}"
            " --json {output} > {log} 2>&1"

    rule join_evaluations:
        input:
            train_log="results/train/{model}/G{G}/seed{seed}/train_log.csv",
            evals=run_evaluations,
        output:
            "results/train/{model}/G{G}/seed{seed}/log.csv",
        log:
            "logs/train/{model}/G{G}/seed{seed}/join_evaluations.log",
        wildcard_constraints:
            G=r"\d+",
            seed=r"\d+",
        conda:
            "../../envs/analysis.yaml"
        params:
            training=trajectory_json,
            code=code_version("join-evaluations"),
        shell:
            "PYTHONPATH=workflow python -m pgrpo join-evaluations --train-log {input.train_log} --evals {input.evals}"
            " --training-json {params.training:q} --csv {output} > {log} 2>&1"
