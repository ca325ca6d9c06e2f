"""ipywidgets panels: render what ``jupyter_gtc.api`` returns, and nothing more. They never
poll Slurm; a job panel is fed by the cluster's one poller."""

from .cluster_panel import ClusterPanel, ClusterProgress
from .job_panel import JobPanel

__all__ = ["ClusterPanel", "ClusterProgress", "JobPanel"]
