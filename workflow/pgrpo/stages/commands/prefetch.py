"""The verb ``pgrpo prefetch``: every model and dataset fetched into the Hugging Face cache on a node with network,
before offline GPU jobs (:mod:`pgrpo.stages.prefetch`)."""

from __future__ import annotations

from pgrpo.stages.commands import WORKFLOW_STAGES, Commands, args_config, json_arg


def add_commands(commands: Commands) -> None:
    p = commands.add("prefetch", WORKFLOW_STAGES, "fetch every model and dataset into HF_HOME (the login node, "
                     "before offline compute nodes), write a manifest", _prefetch)
    p.add_argument("--config", help="config YAML: its models and data (default: config/config.yaml)")
    p.add_argument("--items-json", help="the items as JSON (how rule prefetch calls it; default: from --config)")
    p.add_argument("--manifest", required=True, help="output JSON: what was fetched and where it is in the cache")


def _prefetch(args):
    from pgrpo.stages import prefetch

    items = (json_arg(args.items_json, "--items-json") if args.items_json
             else prefetch.prefetch_items(args_config(args)))
    result = prefetch.run_prefetch(items, args.manifest)
    print(f"{len(result['items'])} item(s) in {result['hf_home']}: {args.manifest}")
