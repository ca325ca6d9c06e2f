"""A node reported faulty to the service that runs it (``api.report_faulty_node``, ``gtc cluster
report-faulty``): on a Vertex AI training cluster, ``reportFaultyNodes``, after which Vertex
replaces the node and says so in the cluster's events (``VM_REPORT_AND_REPLACEMENT``, shown in
its History). A backend takes reports where it has ``report_faulty``; a local cluster has none:
its own supervisor replaces a node its checks fail, and ``gtc cluster fault`` makes one fail.

Vertex's two actions (docs.cloud.google.com .../training-clusters/cluster-resiliency): without a
reason, *delete node* (the default: a static node is made again under its name); with a
``behavior`` and a ``reason`` together, *report host as faulty* (``reportFaultyHost.faultReasons``:
the physical host repaired or the node moved; pre-GA, A3 Ultra and A4 only, and Vertex's service
agent needs ``roles/compute.instanceAdmin.v1``)."""

from __future__ import annotations

from ..backends import get_backend
from ..backends.base import Progress, no_progress
from ..exceptions import ClusterBusy, GtcError, SpecError
from .clusters import ClusterService

# faultReasons[].behavior, as Google's documentation lists them
BEHAVIORS = ("PERFORMANCE", "SILENT_DATA_CORRUPTION", "UNRECOVERABLE_GPU_ERROR", "BEHAVIOR_UNSPECIFIED")
REASON_CHARS = 1000


def report_faulty_node(clusters: ClusterService, name: str, node: str, reason: str | None = None,
                       behavior: str | None = None, progress: Progress = no_progress) -> None:
    """Report ``node`` of cluster ``name`` faulty, with ``reason`` (what was seen) and
    ``behavior`` (Google's fault kind, e.g. ``PERFORMANCE``) where given; waits until the service
    accepted the report (its operation done)."""
    if behavior is not None and behavior not in BEHAVIORS:
        raise SpecError("behavior", behavior, f"one of {', '.join(BEHAVIORS)} (Vertex's kinds of host fault)")
    if reason is not None and (not reason.strip() or len(reason) > REASON_CHARS):
        raise SpecError("reason", reason[:80], f"what was seen, in 1 to {REASON_CHARS} characters")
    if (behavior is None) != (reason is None):  # a host report needs both; a node's delete carries neither
        missing = "reason" if reason is None else "behavior"
        raise SpecError(missing, None, "missing; a behavior and a reason, given together, report the node's "
                                       "physical host as faulty; give neither to have Vertex delete the node and "
                                       "make it again")
    record = clusters.store.get_cluster(name)
    backend = get_backend(record.backend, clusters.home, record.spec)
    report = getattr(backend, "report_faulty", None)
    if report is None:
        raise GtcError(f"cluster {name}: the {record.backend} backend takes no reports of faulty nodes (only Vertex "
                       f"AI training clusters do); a local cluster's supervisor replaces a node its health checks "
                       f"fail (gtc cluster health {name}), and `gtc cluster fault` makes one fail, for testing")
    if record.state != "RUNNING":
        raise ClusterBusy(name, f"cluster {name} is {record.state}; nodes are reported on a RUNNING cluster",
                          record.state)
    reasons = [{k: v for k, v in (("behavior", behavior), ("description", reason)) if v}] if reason or behavior else []
    report(backend.parse_spec(record.spec), record.runtime, node, reasons, progress)


__all__ = ["report_faulty_node"]
