# predictable-grpo: "Predictable GRPO: A Closed-Form Model of Training Dynamics", end to end.
# Wiring only: every rule calls one entry point of the `pgrpo` package (workflow/pgrpo).
#   local, embedded default:  snakemake --cores 2
#   the paper's grid on SLURM: snakemake --profile slurm --configfile config/paper.yaml


from snakemake.utils import min_version

min_version("9.0")


# The embedded default, unless --configfile names another (which then replaces it rather than merging into it).
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/symbolic.smk"
include: "workflow/rules/bandit.smk"
include: "workflow/rules/model.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/fit.smk"
include: "workflow/rules/diagnose.smk"
include: "workflow/rules/live.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/readme.smk"
include: "workflow/rules/kref_sweep.smk"
include: "workflow/rules/prefetch.smk"
include: "workflow/rules/costs.smk"


rule all:
    default_target: True
    input:
        all_targets(),
        "results/costs/job_costs.md",
