"""The local Vertex endpoint's few Compute Engine routes (``/compute/v1/...``), the ones
``gtc capacity`` reads through google-cloud-compute: a zone's reservations, machine types and
accelerator types, each a list in one page.

Machine types are our catalogue's (``spec/machines.py``), accelerator types those its GPU
machine types carry (Compute's names, ``vertex_clusters/accelerators.py``), in every zone.
Reservations, and a zone's own smaller list of machine types where a test wants one, come
from ``<GTC_HOME>/vertex/compute.json``, the local endpoint's file (read at each request, so
that it can change while the endpoint runs)::

    {"zones": {"us-central1-a": {
        "machineTypes": ["a3-highgpu-8g", "n2-standard-8"],          # optional: default all
        "reservations": [{"name": "r1", "status": "READY", "specificReservation": {
            "count": "4", "inUseCount": "1",
            "instanceProperties": {"machineType": "a3-highgpu-8g",
                "guestAccelerators": [{"acceleratorType": "nvidia-h100-80gb", "acceleratorCount": 8}]}}}]}}}

A reservation is served as written there (Compute's JSON), less ``reservationBlocks``: a dense
one's (``"deploymentType": "DENSE"``) blocks, each Compute's ``ReservationBlock`` JSON
(``name``, ``count``, ``inUseCount``), served by the blocks route. Who may call these routes is the
server's guard, as for every route."""

from __future__ import annotations

import json
import re
from typing import Any

from .. import api
from ..exceptions import GtcError, InvalidArgument
from ..spec.machines import MACHINE_TYPES
from ..vertex_clusters.accelerators import to_compute

_ZONE = r"v1/projects/(?P<project>[^/]+)/zones/(?P<zone>[a-z]+-[a-z]+[0-9]+-[a-z])"
# (method, path after /compute/, handler name): the server matches these under /compute/ only.
COMPUTE_ROUTES = [
    ("GET", re.compile(_ZONE + r"/reservations"), "list_reservations"),
    ("GET", re.compile(_ZONE + r"/reservations/(?P<reservation>[^/]+)/reservationBlocks"), "list_reservation_blocks"),
    ("GET", re.compile(_ZONE + r"/machineTypes"), "list_machine_types"),
    ("GET", re.compile(_ZONE + r"/acceleratorTypes"), "list_accelerator_types"),
]
MAX_FIXTURE_BYTES = 1024 * 1024
BASE = "https://www.googleapis.com/compute/v1"


class ReservationNotFound(GtcError):
    http_status = 404
    google_status = "NOT_FOUND"


def fixture_path():
    return api.vertex_request_log().parent / "compute.json"


def _zone_fixture(zone: str) -> dict[str, Any]:
    path = fixture_path()
    try:
        with open(path, "rb") as f:
            text = f.read(MAX_FIXTURE_BYTES + 1)
    except FileNotFoundError:
        return {}
    if len(text) > MAX_FIXTURE_BYTES:
        raise InvalidArgument(f"{path}: more than {MAX_FIXTURE_BYTES} bytes; the local endpoint's Compute "
                              f"fixture is a small file")
    try:
        data = json.loads(text)
    except ValueError as e:
        raise InvalidArgument(f"{path}: not JSON ({e})") from None
    zone_data = ((data.get("zones") if isinstance(data, dict) else None) or {}).get(zone) or {}
    return zone_data if isinstance(zone_data, dict) else {}


def _machine_names(zone: str) -> list[str]:
    listed = _zone_fixture(zone).get("machineTypes")
    return [m for m in MACHINE_TYPES if listed is None or m in listed]


class ComputeMethods:
    """The handlers, mixed into the server's ``Endpoint``."""

    def list_reservations(self, project: str, zone: str) -> dict[str, Any]:
        items = []
        for r in _zone_fixture(zone).get("reservations") or []:
            r = dict(r)
            r.pop("reservationBlocks", None)
            r.setdefault("kind", "compute#reservation")
            r.setdefault("zone", f"{BASE}/projects/{project}/zones/{zone}")
            r.setdefault("selfLink", f"{r['zone']}/reservations/{r.get('name')}")
            items.append(r)
        return {"kind": "compute#reservationList", "id": f"projects/{project}/zones/{zone}/reservations",
                "items": items}

    def list_reservation_blocks(self, project: str, zone: str, reservation: str) -> dict[str, Any]:
        found = [r for r in _zone_fixture(zone).get("reservations") or [] if r.get("name") == reservation]
        if not found:
            raise ReservationNotFound(f"The resource 'projects/{project}/zones/{zone}/reservations/{reservation}' "
                                      f"was not found")
        items = [dict(b, kind="compute#reservationBlock") for b in found[0].get("reservationBlocks") or []]
        return {"kind": "compute#reservationBlocksListResponse", "items": items}

    def list_machine_types(self, project: str, zone: str) -> dict[str, Any]:
        items = []
        for name in _machine_names(zone):
            m = MACHINE_TYPES[name]
            item: dict[str, Any] = {"kind": "compute#machineType", "name": name, "zone": zone,
                                    "guestCpus": m.vcpus, "memoryMb": m.memory_gb * 1024,
                                    "description": f"{m.vcpus} vCPUs, {m.memory_gb} GB RAM",
                                    "selfLink": f"{BASE}/projects/{project}/zones/{zone}/machineTypes/{name}"}
            if m.gpu_type:
                item["accelerators"] = [{"guestAcceleratorType": to_compute(m.gpu_type),
                                         "guestAcceleratorCount": m.gpu_count}]
            items.append(item)
        return {"kind": "compute#machineTypeList", "id": f"projects/{project}/zones/{zone}/machineTypes",
                "items": items}

    def list_accelerator_types(self, project: str, zone: str) -> dict[str, Any]:
        most: dict[str, int] = {}
        for name in _machine_names(zone):
            m = MACHINE_TYPES[name]
            if m.gpu_type and to_compute(m.gpu_type):
                most[to_compute(m.gpu_type)] = max(most.get(to_compute(m.gpu_type), 0), m.gpu_count)
        items = [{"kind": "compute#acceleratorType", "name": name, "zone": zone, "maximumCardsPerInstance": n,
                  "description": "NVIDIA " + name.removeprefix("nvidia-").replace("-", " ").upper(),
                  "selfLink": f"{BASE}/projects/{project}/zones/{zone}/acceleratorTypes/{name}"}
                 for name, n in most.items()]
        return {"kind": "compute#acceleratorTypeList", "id": f"projects/{project}/zones/{zone}/acceleratorTypes",
                "items": items}
