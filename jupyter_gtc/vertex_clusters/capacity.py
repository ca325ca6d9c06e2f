"""A zone's capacity through Compute Engine (``google-cloud-compute``, REST): its reservations
and how many of their nodes are free, its machine and accelerator types, and a cluster spec's
pools checked against them before a create.

Free nodes of a reservation: ``specificReservation.count - inUseCount`` (int64s, which
Compute's JSON sends as strings). The base URL is configurable as for the training-cluster
client (``client.py``): Google's by default with the application default credentials, or the
local Vertex endpoint (``http://127.0.0.1:PORT``, anonymous; ``client_options`` keeps plain
HTTP). google-cloud-compute is imported when a ``Capacity`` is made, never at ``%load_ext``.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any

from . import accelerators
from .client import _anonymous, _default_credentials, _loopback
from .errors import cloud_error

# Compute says "Required 'compute.reservations.list' permission for 'projects/p'".
_REQUIRED = re.compile(r"Required '([a-z]+(?:\.[a-zA-Z]+){2,})' permission")
# Dense GPU types that on demand often meet ZONE_RESOURCE_POOL_EXHAUSTED: a reservation or
# FLEX_START is how Google sells most of them.
STOCKOUT_PRONE = ("a3-", "a4-", "a2-ultragpu-")


@dataclass
class Reservation:
    name: str
    machine_type: str
    accelerators: list[tuple[str, int]]  # (Compute's name, count per node)
    count: int
    in_use: int
    status: str
    specific_only: bool  # only instances that name it may use it
    dense: bool = False  # deploymentType DENSE: its capacity is in blocks of close hosts
    blocks: list[tuple[str, int, int]] = field(default_factory=list)  # (name, free, count) of a dense one

    @property
    def free(self) -> int:
        return max(self.count - self.in_use, 0)


@dataclass
class AcceleratorType:
    name: str  # Compute's (nvidia-h100-80gb)
    vertex: str | None  # Vertex's enum (NVIDIA_H100_80GB), None when our table lacks it
    description: str
    max_per_instance: int


class Capacity:
    """``project``'s capacity in ``zone``."""

    def __init__(self, project: str, zone: str, api_endpoint: str | None = None, credentials: Any = None):
        from google.cloud import compute_v1

        self.project, self.zone = project, zone
        options = {"api_endpoint": api_endpoint} if api_endpoint else None
        if credentials is None:
            credentials = _anonymous() if api_endpoint and _loopback(api_endpoint) else _default_credentials()
        kwargs = {"credentials": credentials, "client_options": options, "transport": "rest"}
        self._reservations = compute_v1.ReservationsClient(**kwargs)
        self._machine_types = compute_v1.MachineTypesClient(**kwargs)
        self._accelerator_types = compute_v1.AcceleratorTypesClient(**kwargs)
        self._blocks = compute_v1.ReservationBlocksClient(**kwargs)
        self._listed: dict[str, list[Any]] = {}  # a zone's types, read once per Capacity

    def reservations(self) -> list[Reservation]:
        """The zone's reservations, with free nodes or not; a dense one with its blocks (a job
        that must sit on close hosts needs its nodes free in one block, not across them)."""
        found = []
        for r in self._call("list reservations", self._reservations.list, "compute.reservations.list"):
            specific = r.specific_reservation
            props = specific.instance_properties
            reservation = Reservation(
                r.name, props.machine_type.rsplit("/", 1)[-1],
                [(a.accelerator_type.rsplit("/", 1)[-1], a.accelerator_count) for a in props.guest_accelerators],
                int(specific.count), int(specific.in_use_count), r.status, bool(r.specific_reservation_required),
                r.deployment_type == "DENSE")
            if reservation.dense:
                blocks = self._call(f"list blocks of reservation {r.name}", self._blocks.list,
                                    "compute.reservationBlocks.list", reservation=r.name)
                reservation.blocks = [(b.name, max(int(b.count) - int(b.in_use_count), 0), int(b.count))
                                      for b in blocks]
            found.append(reservation)
        return found

    def machine_types(self) -> dict[str, Any]:
        """The zone's machine types by name (Compute's ``MachineType``)."""
        return {m.name: m for m in self._call("list machine types", self._machine_types.list,
                                              "compute.machineTypes.list")}

    def accelerator_types(self) -> list[AcceleratorType]:
        return [AcceleratorType(a.name, accelerators.to_vertex(a.name), a.description, a.maximum_cards_per_instance)
                for a in self._call("list accelerator types", self._accelerator_types.list,
                                    "compute.acceleratorTypes.list")]

    def check(self, body: dict[str, Any], reservations: list[Reservation] | None = None) -> list[str]:
        """What in ``body`` (a ``ModelDevelopmentCluster``, camelCase) this zone cannot give: a
        pool's machine type or accelerator the zone lacks (with its close matches), or a
        stockout-prone type on demand with no free reserved node for it. Pools in another
        zone are not this zone's to check. Empty when nothing was found."""
        machines = self.machine_types()
        gpus = {a.name for a in self.accelerator_types()}
        reservations = self.reservations() if reservations is None else reservations
        problems = []
        for i, pool in enumerate(body.get("nodePools") or []):
            if pool.get("zone", self.zone) != self.zone:
                continue
            spec = pool.get("machineSpec") or {}
            machine, gpu = spec.get("machineType", ""), spec.get("acceleratorType")
            where = f"nodePools[{i}] ({pool.get('id')})"
            if machine not in machines:
                close = difflib.get_close_matches(machine, list(machines), n=3, cutoff=0.6)
                problems.append(f"{where}: machine type {machine!r} is not offered in zone {self.zone}; "
                                + (f"close ones there: {', '.join(close)}" if close else
                                   "`gtc capacity --zone ZONE` lists another zone's"))
                continue
            if gpu:
                compute_name = accelerators.to_compute(gpu)
                if compute_name is None:
                    problems.append(f"{where}: accelerator {gpu!r} has no Compute Engine name in our table "
                                    f"(vertex_clusters/accelerators.py)")
                elif compute_name not in gpus:
                    problems.append(f"{where}: accelerator {gpu} ({compute_name}) is not offered in zone "
                                    f"{self.zone}")
            if machine.startswith(STOCKOUT_PRONE) and pool.get("provisioningModel", "ON_DEMAND") == "ON_DEMAND":
                free = sum(r.free for r in reservations if r.machine_type == machine)
                nodes = int((pool.get("scalingSpec") or {}).get("maxNodeCount") or 1)
                if free < nodes:
                    problems.append(f"{where}: {machine} on demand often meets a stockout "
                                    f"(ZONE_RESOURCE_POOL_EXHAUSTED) and the zone's reservations have {free} free "
                                    f"node(s) of it for {nodes}: use a reservation (provisioning_model: "
                                    f"RESERVATION), FLEX_START or SPOT")
        return problems

    def _call(self, what: str, method: Any, permission: str, **more: str) -> list[Any]:
        from google.api_core import exceptions

        if what not in self._listed or "reservation" in what:  # reservations change; types do not
            try:
                self._listed[what] = list(method(project=self.project, zone=self.zone, **more))
            except exceptions.GoogleAPICallError as e:
                raise _error(e, f"{what} of zone {self.zone}", self.project, permission) from None
        return self._listed[what]


def _error(e: Any, what: str, project: str, permission: str) -> Exception:
    """google-api-core's exception as ``errors.cloud_error`` takes Google's answers: Compute
    names a missing permission in its own words ("Required '...' permission"), so it is handed
    over as the ErrorInfo's metadata, as Vertex gives it."""
    message = str(getattr(e, "message", "") or e)
    details = [d for d in (getattr(e, "details", None) or []) if isinstance(d, dict)]
    http = getattr(e, "code", None)
    if http == 403 and "has not been used" not in message and "disabled" not in message:
        named = _REQUIRED.search(message)
        details.append({"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "IAM_PERMISSION_DENIED",
                        "metadata": {"permission": named.group(1) if named else permission}})
    elif getattr(e, "reason", None):
        details.append({"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": e.reason,
                        "metadata": dict(getattr(e, "metadata", None) or {})})
    return cloud_error({"message": message, "details": details}, what, project,
                       http_status=http if isinstance(http, int) else None)
