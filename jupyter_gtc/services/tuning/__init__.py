"""Hyperparameter tuning: a Vertex ``StudySpec`` run as parallel Slurm trials, with Optuna as
the engine (``engine``), one driver thread per study (``driver``), and ``Study`` handles that
any process can hold (``study``, ``service``)."""

from .service import TuningService
from .study import Study, StudyFeed
from .trials import StudySnapshot, TrialView

__all__ = ["Study", "StudyFeed", "StudySnapshot", "TrialView", "TuningService"]
