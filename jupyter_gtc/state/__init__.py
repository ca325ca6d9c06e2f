"""The state store: one SQLite database that outlives kernels and servers."""

from .store import ClusterRecord, JobRecord, Store, default_home, open_store

__all__ = ["ClusterRecord", "JobRecord", "Store", "default_home", "open_store"]
