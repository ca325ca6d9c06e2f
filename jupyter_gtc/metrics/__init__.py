"""Training metrics: scalars read incrementally from TensorBoard event files and the
``cloudml-hypertune`` metrics file. One code path feeds job panels, ``job.metrics()``,
tuning's early stopping and the sidebar."""

from .scalar import Scalar

__all__ = ["Scalar"]
