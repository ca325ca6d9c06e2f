"""``gtc model ...``: the model registry's verbs (``cli.py`` adds them). Each calls the ``api``
function of the same action and prints; errors go up to ``cli.main``, which prints one line.

    gtc model list                              every model: name, versions, aliases, newest, age
    gtc model show NAME[@ALIAS|@VERSION]        one version: aliases, artifact, lineage, history
    gtc model alias NAME@VERSION ALIAS          move ALIAS to that version (--remove ALIAS removes it)
    gtc model delete NAME[@VERSION]             a version, or the model and every version
    gtc model register JOB --model NAME ...     the magic %gtc_register's verb
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone

from . import api
from .exceptions import SpecError


def add_model_verbs(verbs) -> None:
    model = verbs.add_parser("model", help="the model registry: versions, aliases, lineage")
    mv = model.add_subparsers(title="model commands", metavar="VERB")

    lst = mv.add_parser("list", help="every registered model: versions, aliases, newest version, age")
    lst.add_argument("--json", action="store_true")
    lst.set_defaults(func=_list)

    show = mv.add_parser("show", help="one version (NAME: the one holding 'default'): artifact, lineage, history")
    show.add_argument("ref", metavar="NAME[@ALIAS|@VERSION]")
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=_show)

    alias = mv.add_parser("alias", help="give ALIAS to version NAME@VERSION, moving it from the version that held "
                                        "it; --remove ALIAS removes it ('default' moves, never goes)")
    alias.add_argument("ref", metavar="NAME@VERSION")
    alias.add_argument("alias", metavar="ALIAS", nargs="?")
    alias.add_argument("--remove", metavar="ALIAS", help="remove ALIAS from that version (as `-- -ALIAS`)")
    alias.set_defaults(func=_alias)

    delete = mv.add_parser("delete", help="delete version NAME@VERSION, or model NAME with every version")
    delete.add_argument("ref", metavar="NAME[@VERSION]")
    delete.set_defaults(func=_delete)

    register = mv.add_parser("register", help="register a finished job's model (its AIP_MODEL_DIR) as a new "
                                              "version")
    register.add_argument("job", help="Slurm job id or job name")
    add_register_options(register)
    register.set_defaults(func=_register)

    from .cli_endpoints import add_deploy_verbs  # serving's verbs live in their own module

    add_deploy_verbs(mv)


def add_register_options(parser) -> None:
    """The options of ``gtc model register`` and of the magic ``%gtc_register``."""
    parser.add_argument("--model", required=True, help="the model's name: a new model, or a new version of one")
    parser.add_argument("--alias", action="append", default=[], help="an alias for the new version (repeatable)")
    parser.add_argument("--description", help="what this version is")
    parser.add_argument("--label", action="append", default=[], metavar="KEY=VALUE", help="a label (repeatable)")
    parser.add_argument("--copy", action="store_true", help="copy the model folder into $GTC_HOME/models/")
    parser.add_argument("--parent", metavar="NAME[@VERSION]", help="the registered model it started from")
    parser.add_argument("--cluster")


def parse_labels(pairs: list[str]) -> dict[str, str]:
    labels = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq:
            raise SpecError("--label", pair, "a label is KEY=VALUE, e.g. --label team=nlp")
        labels[key] = value
    return labels


def register_from_args(job: str, args):
    return api.register_model(job, args.model, alias=args.alias or None, description=args.description,
                              labels=parse_labels(args.label), copy=args.copy, parent=args.parent,
                              cluster=args.cluster)


def _register(args) -> None:
    model = register_from_args(args.job, args)
    print(f"registered {model.name}@{model.version} ({', '.join(model.aliases) or 'no aliases'}) from job "
          f"{args.job}: {model.artifact_uri}")


def print_registered(job) -> None:
    """After a recipe's job: which model version it became (the registry's read registers it)."""
    for model in api.list_models():
        for version in model.versions:
            made_by = version.lineage.get("job") or {}
            if (made_by.get("id"), made_by.get("cluster")) == (job.id, job.cluster):
                print(f"registered as {model.name}@{version.version} ({', '.join(version.aliases) or 'no aliases'})")
                return
    print("its model was not registered: the job did not complete, or left no model in its model folder")


def _list(args) -> None:
    models = api.list_models()
    if args.json:
        print(json.dumps([{"name": m.name, "description": m.description, "labels": m.labels,
                           "versions": [{"version": v.version, "aliases": v.aliases} for v in m.versions]}
                          for m in models], indent=2))
        return
    if not models:
        print("no models registered yet; register a finished job's model with `gtc model register JOB --model "
              "NAME` (or %gtc_register in a notebook)")
        return
    from .cli_tables import Column, render

    columns = [Column("MODEL", "flex"), Column("VERSIONS", right=True), Column("DEFAULT", right=True),
               Column("ALIASES", "drop", drop=1), Column("NEWEST", right=True), Column("AGE", "drop", drop=2)]
    rows = []
    for m in models:
        default = next((v.version for v in m.versions if "default" in v.aliases), None)
        aliases = ", ".join(f"{a}@{v.version}" for v in m.versions for a in v.aliases if a != "default")
        newest = m.versions[-1] if m.versions else None
        rows.append([m.name, str(len(m.versions)), str(default or "-"), aliases or "-",
                     str(newest.version) if newest else "-", _age(newest.created_at if newest else m.created_at)])
    print(render(columns, rows))


def _show(args) -> None:
    model = api.get_model(args.ref)
    if args.json:
        print(json.dumps({**model.to_json(), "lineage": model.lineage}, indent=2, default=str))
        return
    record = model.record
    print(f"{model.name}@{model.version}  aliases: {', '.join(record.aliases) or '-'}")
    print(f"  artifact: {record.artifact_uri}" + (" (copied)" if record.copied else ""))
    if record.description:
        print(f"  description: {record.description}")
    if record.labels:
        print(f"  labels: {', '.join(f'{k}={v}' for k, v in sorted(record.labels.items()))}")
    print(f"  registered: {_when(record.created_at)} by {record.created_by}")
    lineage = record.lineage
    job = lineage.get("job")
    if job:
        print(f"  job: {job['id']} ({job['name']}) on {job['cluster']}, {job['state']}; folder {job['job_dir']}")
        script = lineage.get("script") or {}
        print(f"  script: {script.get('path')}")
        if lineage.get("options"):
            print(f"  options: {' '.join(lineage['options'])}")
    trial = lineage.get("trial")
    if trial:
        params = ", ".join(f"{k}={v}" for k, v in trial["params"].items())
        print(f"  trial: {trial['trial_id']} of study {trial['study']} ({params}); value {trial['value']}")
    for tag, point in (lineage.get("metrics") or {}).items():
        print(f"  metric {tag}: {point['value']:g} at step {point['step']}")
    if lineage.get("checkpoint"):
        print(f"  checkpoint: {lineage['checkpoint']}")
    if lineage.get("parent"):
        print(f"  parent: {lineage['parent']}")
    print("  history:")
    for event in model.events:
        detail = event["detail"]
        what = {"alias": lambda: f"alias {detail['alias']} -> {event['version']}"
                + (f" (from {detail['from']})" if detail.get("from") else ""),
                "unalias": lambda: f"alias {detail['alias']} removed from {event['version']}",
                "register": lambda: f"registered version {event['version']}",
                "delete_version": lambda: f"deleted version {event['version']}",
                }.get(event["event"], lambda: f"{event['event']} {event['version'] or ''}".rstrip())()
        print(f"    {_when(event['time'])}  {event['user']}  {what}")


def _alias(args) -> None:
    if (args.alias is None) == (args.remove is None):
        raise SpecError("ALIAS", args.alias or args.remove, "give one alias to apply, or --remove ALIAS")
    model = api.set_model_alias(args.ref, args.alias if args.remove is None else f"-{args.remove}")
    print(f"{model.name}@{model.version}: aliases {', '.join(model.aliases) or '-'}")


def _delete(args) -> None:
    api.delete_model(args.ref)
    print(f"deleted {'version ' if '@' in args.ref else 'model '}{args.ref}")


def _when(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _age(created_at: float) -> str:
    seconds = max(0, int(time.time() - created_at))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
