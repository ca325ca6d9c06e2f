"""``gtc capacity``: a zone's capacity through Compute Engine (``vertex_clusters/capacity.py``)
and, given a spec, its pools checked there and what it costs an hour (``prices.py``).

    gtc capacity --zone us-central1-a [--machine-type a3-megagpu-8g] [--spec FILE]
        reservations with free nodes, the zone's accelerator types (Compute's name and
        Vertex's), the machine type asked for (offered there or not), the spec's problems
        and its $/hour at on-demand list prices.

Errors from Google (a permission, the API not enabled) come up as ``CloudApiError``s naming
the fix (``vertex_clusters/errors.py``); ``cli.main`` prints them on one line.
"""

from __future__ import annotations

import difflib
import os
import re

from . import api
from .cli_tables import Column, render
from .exceptions import GtcError, SettingMissing, SpecError

ZONE_RE = re.compile(r"[a-z]+-[a-z]+[0-9]+-[a-z]")


def add_capacity_verb(verbs) -> None:
    capacity = verbs.add_parser("capacity", help="a zone's reservations with free nodes, machine and accelerator "
                                                 "types; with --spec, its pools checked there and its $/hour")
    capacity.add_argument("--zone", required=True, help="e.g. us-central1-a")
    capacity.add_argument("--machine-type", help="say whether the zone offers it and its reservations' free nodes")
    capacity.add_argument("--spec", help="a training-cluster spec (JSON or YAML) to check and price")
    capacity.add_argument("--project", help="default: gtc config vertex.project, $GOOGLE_CLOUD_PROJECT")
    capacity.add_argument("--api-endpoint", help="Compute Engine's API (default: Google's; the local Vertex "
                                                 "endpoint's http://127.0.0.1:PORT serves it too)")
    capacity.set_defaults(func=_capacity)


def _capacity(args) -> None:
    from .vertex_clusters import prices
    from .vertex_clusters.capacity import Capacity

    if not ZONE_RE.fullmatch(args.zone):
        raise SpecError("--zone", args.zone, "a zone such as us-central1-a (region, dash, letter)")
    body = None
    if args.spec:  # read and checked before any call: a wrong spec costs no request
        from .spec.cluster import load_cluster_spec

        body = load_cluster_spec(args.spec).to_vertex()
    endpoint = args.api_endpoint or _local_api_endpoint()
    project = (args.project or api.get_config("vertex.project") or os.environ.get("GOOGLE_CLOUD_PROJECT")
               or ("local-project" if endpoint else None))
    if not project:
        raise SettingMissing("vertex.project", "`gtc config set vertex.project PROJECT`, or set "
                                               "GOOGLE_CLOUD_PROJECT, or give --project")
    zone = Capacity(project, args.zone, api_endpoint=endpoint)
    reservations = zone.reservations()
    print(f"Zone {args.zone} of project {project}")

    free = [r for r in reservations if r.free and (not args.machine_type or r.machine_type == args.machine_type)]
    print("\nReservations with free nodes" + (f" of {args.machine_type}" if args.machine_type else "") + ":")
    if free:
        rows = [[r.name, r.machine_type, ", ".join(f"{n} x {a}" for a, n in r.accelerators) or "-",
                 f"{r.free} of {r.count}", r.status, "specific" if r.specific_only else "any"] for r in free]
        print(render([Column("NAME", "flex"), Column("MACHINE TYPE"), Column("ACCELERATORS", "drop"),
                      Column("FREE"), Column("STATUS"), Column("USED BY", "drop")], rows))
        for r in free:  # a dense reservation's nodes for one tightly coupled job must be free in one block
            if r.blocks:
                print(f"  {r.name} (dense), free by block: "
                      + ", ".join(f"{name} {left} of {count}" for name, left, count in r.blocks))
    else:
        print(f"  none ({len(reservations)} reservation(s) in the zone, none with a free node)")

    print("\nAccelerator types:")
    rows = [[a.name, a.vertex or "(not in our table)", str(a.max_per_instance), a.description]
            for a in zone.accelerator_types()]
    print(render([Column("COMPUTE"), Column("VERTEX"), Column("MAX/VM"), Column("DESCRIPTION", "flex")], rows)
          if rows else "  none")

    if args.machine_type:
        machines = zone.machine_types()
        if args.machine_type in machines:
            m = machines[args.machine_type]
            print(f"\nMachine type {m.name}: offered in {args.zone} ({m.guest_cpus} vCPUs, {m.memory_mb // 1024} GB)")
        else:
            close = difflib.get_close_matches(args.machine_type, list(machines), n=3, cutoff=0.6)
            print(f"\nMachine type {args.machine_type}: not offered in {args.zone}"
                  + (f"; close ones there: {', '.join(close)}" if close else ""))

    if body is not None:
        print(f"\nSpec {args.spec}:")
        problems = zone.check(body, reservations)
        for line in problems:
            print(f"  problem: {line}")
        if not problems:
            print(f"  every pool in {args.zone} is offered there")
        cost = prices.estimate(body)
        for pool, machine, nodes, each in cost.pools:
            price = f"${each:,.2f}/h each, ${nodes * each:,.2f}/h" if each is not None else "no price in our table"
            print(f"  pool {pool}: {nodes} x {machine}: {price}")
        unpriced = f" (without {', '.join(cost.unpriced)})" if cost.unpriced else ""
        print(f"  estimate: ${cost.total:,.2f}/hour{unpriced}: {prices.WHAT}")
        if problems:  # after the whole answer, so a script sees the failure and a person every line
            raise GtcError(f"{args.spec}: {len(problems)} problem(s) in zone {args.zone}, above; fix them before "
                           f"a create")


def _local_api_endpoint() -> str | None:
    """gtc config vertex.api_endpoint where it is a loopback local endpoint (which serves
    Compute's routes too); Google's Vertex API is not Compute's, so no other value is taken."""
    configured = api.get_config("vertex.api_endpoint") or ""
    return configured if re.match(r"http://(127\.0\.0\.1|localhost)(:\d+)?/?$", configured) else None
