"""Training metrics: scalars read incrementally from TensorBoard event files and the
``cloudml-hypertune`` metrics file. One code path feeds job panels, ``job.metrics()``,
tuning's early stopping and the sidebar."""

from .hypertune import HYPERTUNE_RUN
from .reader import MetricsReader, PollStats, read_metrics
from .scalar import Scalar

__all__ = ["HYPERTUNE_RUN", "MetricsReader", "PollStats", "Scalar", "read_metrics"]
