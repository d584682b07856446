"""Configuration: load a config file, validate it against ``config/schema.yaml``, explain errors in one line.

The Snakefile validates with Snakemake's own ``validate()`` (which fills schema defaults); this module gives the
same check to the ``pgrpo`` CLI, turns a ``jsonschema`` error into one line that names the offending key, and
adds the few checks a JSON schema cannot express (``check_config_semantics``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Mapping

import yaml

from pgrpo.errors import InputError

REPO_ROOT = Path(__file__).resolve().parents[2]
SCHEMA_PATH = REPO_ROOT / "config" / "schema.yaml"
DEFAULT_CONFIG_PATH = REPO_ROOT / "config" / "config.yaml"


def load_schema(path: str | Path = SCHEMA_PATH) -> dict:
    with open(path) as handle:
        return yaml.safe_load(handle)


def _validator_with_defaults(schema: dict):
    """A Draft 2020-12 validator that fills ``default`` values, as Snakemake's ``validate`` does."""
    from jsonschema import Draft202012Validator, validators

    validate_properties = Draft202012Validator.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, subschema):
        if isinstance(instance, dict):
            for name, prop in properties.items():
                if "default" in prop:
                    instance.setdefault(name, json.loads(json.dumps(prop["default"])))
        yield from validate_properties(validator, properties, instance, subschema)

    return validators.extend(Draft202012Validator, {"properties": set_defaults})(schema)


def key_path(error) -> str:
    """The dotted config key an error is about (``models.tiny.path``), or ``<top level>``."""
    parts = [str(p) for p in error.absolute_path]
    return ".".join(parts) if parts else "<top level>"


def describe_validation_error(error) -> str:
    """One line that names the key and says what is wrong with it."""
    where = key_path(error)
    validator = error.validator
    if validator == "additionalProperties":
        extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        allowed = ", ".join(sorted(error.schema.get("properties", {})))
        names = ".".join(filter(None, [where if where != "<top level>" else "", extra[0] if extra else ""]))
        return f"config key '{names}' is not a known key (allowed here: {allowed})"
    if validator == "required":
        missing = error.message.split("'")[1] if "'" in error.message else error.message
        prefix = "" if where == "<top level>" else where + "."
        return f"config key '{prefix}{missing}' is required but missing"
    if validator in ("anyOf", "oneOf") and error.schema.get("description"):
        return f"config key '{where}': {error.schema['description']}"
    if validator == "type":
        return f"config key '{where}' must be of type {error.validator_value}, got {error.instance!r}"
    if validator in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        op = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=", "exclusiveMaximum": "<"}[validator]
        return f"config key '{where}' must be {op} {error.validator_value}, got {error.instance!r}"
    if validator == "enum":
        return f"config key '{where}' must be one of {error.validator_value}, got {error.instance!r}"
    if validator == "minItems":
        return f"config key '{where}' needs at least {error.validator_value} item(s)"
    return f"config key '{where}': {error.message}"


def one_line_validation_error(error: BaseException) -> str:
    """Flatten a Snakemake ``WorkflowError`` wrapping a ``jsonschema.ValidationError`` (or one directly)."""
    from jsonschema.exceptions import ValidationError

    if isinstance(error, InputError):
        return str(error)
    if isinstance(error, ValidationError):
        return "Invalid configuration: " + describe_validation_error(error)
    # Snakemake's WorkflowError formats the ValidationError into its text; the original is its cause/context
    for inner in (*getattr(error, "args", ()), error.__cause__, error.__context__):
        if isinstance(inner, ValidationError):
            return "Invalid configuration: " + describe_validation_error(inner)
    text = str(error).strip().splitlines()
    return "Invalid configuration: " + (text[0] if text else type(error).__name__)


def validate_config(config: dict, schema: Mapping | None = None) -> dict:
    """Validate in place (filling defaults) and run the semantic checks; raise InputError in one line."""
    validator = _validator_with_defaults(dict(schema or load_schema()))
    # the first error, as Snakemake's validate() reports it (anyOf errors keep their own description)
    error = next(iter(validator.iter_errors(config)), None)
    if error is not None:
        raise InputError("Invalid configuration: " + describe_validation_error(error))
    check_config_semantics(config)
    return config


def check_config_semantics(config: Mapping[str, Any]) -> None:
    """Checks a JSON schema cannot state; each raises InputError naming the key."""
    sizes = list(config.get("group_sizes", []))
    if len(set(sizes)) != len(sizes):
        raise InputError("Invalid configuration: config key 'group_sizes' lists a group size twice")
    seeds = list(config.get("seeds", []))
    if len(set(seeds)) != len(seeds):
        raise InputError("Invalid configuration: config key 'seeds' lists a seed twice")
    for name, spec in (config.get("models") or {}).items():
        if "/" in name or not name:
            raise InputError(f"Invalid configuration: config key 'models.{name}': a model name may not contain '/'")
        if spec.get("build_tiny") and not spec.get("path"):
            raise InputError(f"Invalid configuration: config key 'models.{name}.path' is needed with build_tiny")
    training = config.get("training") or {}
    if training:
        # TRL: num_generations must divide the generation batch, per-device batch x processes x steps_per_generation
        per_device = training.get("per_device_train_batch_size", 4)
        accumulation = training.get("gradient_accumulation_steps", 4)
        steps_per_generation = training.get("steps_per_generation") or accumulation
        processes = max(1, int((training.get("resources") or {}).get("gpus", 0)))
        generation_batch = per_device * processes * steps_per_generation
        for G in sizes:
            if generation_batch % G:
                raise InputError(
                    f"Invalid configuration: config key 'group_sizes' has G={G}, which does not divide the "
                    f"generation batch training.per_device_train_batch_size x GPUs x steps_per_generation = "
                    f"{per_device} x {processes} x {steps_per_generation} = {generation_batch}"
                )
        if training.get("use_vllm") and training.get("vllm_mode") == "server":
            raise InputError(
                "Invalid configuration: config key 'training.vllm_mode': 'server' needs a `trl vllm-serve` process "
                "beside each training job, which this workflow does not start; use vllm_mode: colocate"
            )
        gpus = (training.get("resources") or {}).get("gpus", 0)
        accelerate_config = training.get("accelerate_config") or "config/accelerate/deepspeed_zero2.yaml"
        if gpus > 1 and not (REPO_ROOT / accelerate_config).is_file() and not Path(accelerate_config).is_file():
            raise InputError(
                f"Invalid configuration: config key 'training.accelerate_config': {accelerate_config} does not exist "
                f"(training.resources.gpus = {gpus} launches through `accelerate launch` with it)"
            )


#: A model name or id that says it is a chat/instruct (or chat-distilled) model, whose tokenizer has a chat template.
CHAT_MODEL = re.compile(r"chat|instruct|-it\b|distill|\br1\b", re.IGNORECASE)


def chat_template_warnings(config: Mapping[str, Any]) -> list[str]:
    """One line per chat model that some prompts would reach without its chat template (data.train, data.eval,
    evaluation, a benchmark's own setting): such a model answers a raw ``Question: ...`` prompt and runs on."""
    chat_models = [name for name, spec in (config.get("models") or {}).items()
                   if CHAT_MODEL.search(f"{name} {spec.get('id') or ''} {spec.get('path') or ''}")]
    if not chat_models:
        return []
    settings = {f"data.{role}.chat_template": (spec or {}).get("chat_template")
                for role, spec in (config.get("data") or {}).items()}
    evaluation = (config.get("evaluation") or {}).get("chat_template")
    benchmarks = config.get("benchmarks") or {}
    if any(b.get("chat_template") is None for b in benchmarks.values()):
        settings["evaluation.chat_template"] = evaluation
    settings.update({f"benchmarks.{n}.chat_template": b["chat_template"] for n, b in benchmarks.items()
                     if b.get("chat_template") is not None})
    return [f"{key} is {value!r}: the chat model(s) {', '.join(chat_models)} would see prompts without their chat "
            "template (set it to true or auto)" for key, value in settings.items() if value in (False, None)]


def load_config(path: str | Path = DEFAULT_CONFIG_PATH) -> dict:
    """Read a YAML config file and validate it; errors name the file and the key."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"config file not found: {path}")
    try:
        with open(path) as handle:
            config = yaml.safe_load(handle) or {}
    except yaml.YAMLError as error:
        raise InputError(f"config file {path} is not valid YAML: {str(error).splitlines()[0]}") from None
    try:
        return validate_config(config)
    except InputError as error:
        raise InputError(f"{path}: {error}") from None
