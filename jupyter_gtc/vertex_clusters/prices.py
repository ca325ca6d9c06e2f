"""What a spec costs per hour, from a price table we keep here: Compute Engine's on-demand list
prices in us-central1 (USD per hour, per machine), for the machine types of our catalogue
(``spec/machines.py``). An accelerator-optimized type's price (a2, a3, a4, g2) includes its
GPUs. Other regions, Spot, FLEX_START, committed-use and reservation discounts, disks,
networking and Vertex's own management fee are not in it: the estimate says so.

Prices change; the table carries its date and its source, and a machine type without a price
here is named in the estimate (never priced by a guess). UNVERIFIED: the figures were written
on ``AS_OF`` on a machine that could not reach those pages, from what was known of them, not
read from them (another page of 2026 puts an a3-highgpu-8g far lower): every estimate says so.
Check them against ``SOURCES`` before a budget rests on them. To renew the table: read the
pages for us-central1, change the figures and ``AS_OF``, and set ``VERIFIED``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

AS_OF = "2026-12-04"
REGION = "us-central1"
SOURCES = ("https://cloud.google.com/compute/vm-instance-pricing",
           "https://cloud.google.com/compute/gpus-pricing")
VERIFIED = False  # whether the figures below were read from SOURCES on AS_OF (module doc)
WHAT = (f"on-demand list prices in {REGION} as of {AS_OF} (USD/hour; "
        f"{'' if VERIFIED else 'NOT verified against the price page: '}check {SOURCES[0]}); Spot, FLEX_START, "
        f"committed-use and reservation prices differ, and disks, network and Vertex's fee are extra")

# N2 and C2 are priced per vCPU and per GB of memory; a predefined type is the sum.
_PER_VCPU_GB = {"n2-standard": (0.031611, 0.004237), "n2-highmem": (0.031611, 0.004237),
                "c2-standard": (0.03398, 0.00455)}

ON_DEMAND_USD_PER_HOUR = {
    # A2 (A100 40GB / 80GB), GPUs included
    "a2-highgpu-1g": 3.673385, "a2-highgpu-2g": 7.34677, "a2-highgpu-4g": 14.69354,
    "a2-highgpu-8g": 29.38708, "a2-megagpu-16g": 55.739504,
    "a2-ultragpu-1g": 5.06879789, "a2-ultragpu-2g": 10.13759578, "a2-ultragpu-4g": 20.27519156,
    "a2-ultragpu-8g": 40.55038312,
    # A3 High (H100 80GB), GPUs included. a3-megagpu-8g, a3-ultragpu-8g and a4-highgpu-8g are
    # sold mostly through reservations and FLEX_START: no on-demand figure here.
    "a3-highgpu-8g": 88.253728,
    # G2 (L4), GPUs included
    "g2-standard-4": 0.70683228, "g2-standard-8": 0.85362431, "g2-standard-12": 1.00041635,
    "g2-standard-16": 1.14720838, "g2-standard-24": 2.00083270, "g2-standard-32": 1.73399245,
    "g2-standard-48": 4.00166539, "g2-standard-96": 8.00333078,
}


def price(machine_type: str) -> float | None:
    """USD per hour of one ``machine_type`` on demand, or None when the table has no figure."""
    if machine_type in ON_DEMAND_USD_PER_HOUR:
        return ON_DEMAND_USD_PER_HOUR[machine_type]
    family, _, size = machine_type.rpartition("-")
    if family in _PER_VCPU_GB and size.isdigit():
        from ..spec.machines import lookup

        known = lookup(machine_type)
        if known is not None:
            per_vcpu, per_gb = _PER_VCPU_GB[family]
            return round(known.vcpus * per_vcpu + known.memory_gb * per_gb, 6)
    return None


@dataclass
class Estimate:
    """Each pool's line (id, machine type, nodes, USD/hour of one node or None) and the total
    of those priced; ``unpriced`` names the machine types the table lacks."""

    pools: list[tuple[str, str, int, float | None]] = field(default_factory=list)

    @property
    def total(self) -> float:
        return sum(nodes * each for _, _, nodes, each in self.pools if each is not None)

    @property
    def unpriced(self) -> list[str]:
        return list(dict.fromkeys(m for _, m, _, each in self.pools if each is None))


def estimate(body: dict[str, Any]) -> Estimate:
    """The hourly cost of a ``ModelDevelopmentCluster`` body (camelCase, as ``to_vertex()``)
    at its pools' largest size (``maxNodeCount``), each node at its machine type's price."""
    result = Estimate()
    for pool in body.get("nodePools") or []:
        machine = (pool.get("machineSpec") or {}).get("machineType", "")
        scaling = pool.get("scalingSpec") or {}
        nodes = int(scaling.get("maxNodeCount") or scaling.get("minNodeCount") or 1)
        result.pools.append((str(pool.get("id")), machine, nodes, price(machine)))
    return result
