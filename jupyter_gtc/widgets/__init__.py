"""ipywidgets panels: render what ``jupyter_gtc.api`` returns, and nothing more. They never
poll Slurm; a job panel is fed by the cluster's one poller."""

from ..api import register_endpoint_plotter, register_job_plotter
from .cluster_panel import ClusterPanel, ClusterProgress
from .endpoint_plot import plot_endpoint
from .job_panel import JobPanel
from .job_plot import plot_job

register_job_plotter(plot_job)  # job.plot() draws with these widgets from now on
register_endpoint_plotter(plot_endpoint)  # and ep.plot()

__all__ = ["ClusterPanel", "ClusterProgress", "JobPanel", "plot_endpoint", "plot_job"]
