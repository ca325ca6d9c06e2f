"""Typed specs validated once, at the edge: clusters now; jobs and studies later."""

from .cluster import ClusterSpec, NodePool, load_cluster_spec, parse_cluster_spec
from .machines import MACHINE_TYPES, MachineType

__all__ = ["ClusterSpec", "NodePool", "MACHINE_TYPES", "MachineType", "load_cluster_spec", "parse_cluster_spec"]
