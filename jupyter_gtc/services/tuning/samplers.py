"""The ``bayesian`` sampler for spaces without conditional parameters: Optuna's Gaussian process
sampler, with every ``TPE_EVERY``-th trial drawn by Optuna's multivariate TPE instead.

Why the mix (bench/tuning_quality.py, Hartmann6, 4 trials at once): the GP alone put a
coordinate on the edge of its range in its first model-based trials (x2 = 0 where the optimum
has 0.15) and never moved it again. That coordinate matters little near the optimum, so the GP
fits it a long lengthscale; every good trial then has the same value there, which teaches it
nothing more, and its expected improvement from changing it stays below that of trying
elsewhere. Neither more acquisition optimisation (30 local searches from 8192 candidates), a
noise-free GP, nor more random start-up trials moved it. TPE draws each coordinate around the
good trials with a wide kernel, so its trials vary what the GP holds still; with those in the
data the GP learns the coordinate's slope and takes it (seed 2: within 5% at trial 50, not in
80 before). Both see the trials still running: the GP through q-batch expected improvement over
them, TPE through its constant liar.

Imports Optuna at module level: the engine imports this module only when it makes a sampler.
"""

from __future__ import annotations

import optuna

# One trial in this many is TPE's: 1 in 4 measured best of what we tried (see the module doc).
TPE_EVERY = 4


class GPWithTPE(optuna.samplers.BaseSampler):
    """Delegates each trial to ``gp``, or to ``tpe`` when ``trial.number % every == every - 1``
    (by number, so a seed gives the same sequence in any process that drives the study)."""

    def __init__(self, gp: optuna.samplers.BaseSampler, tpe: optuna.samplers.BaseSampler, every: int = TPE_EVERY):
        self.gp, self.tpe, self.every = gp, tpe, every

    def _for(self, trial) -> optuna.samplers.BaseSampler:
        return self.tpe if trial.number % self.every == self.every - 1 else self.gp

    def infer_relative_search_space(self, study, trial):
        return self._for(trial).infer_relative_search_space(study, trial)

    def sample_relative(self, study, trial, search_space):
        return self._for(trial).sample_relative(study, trial, search_space)

    def sample_independent(self, study, trial, param_name, param_distribution):
        return self._for(trial).sample_independent(study, trial, param_name, param_distribution)

    def before_trial(self, study, trial) -> None:
        self.gp.before_trial(study, trial)
        self.tpe.before_trial(study, trial)

    def after_trial(self, study, trial, state, values) -> None:
        self.gp.after_trial(study, trial, state, values)
        self.tpe.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self.gp.reseed_rng()
        self.tpe.reseed_rng()


def gp_with_tpe(seed: int | None, startup: int) -> GPWithTPE:
    """Both start with ``startup`` random trials; the ExperimentalWarnings of GPSampler and
    multivariate TPE say nothing a user can act on."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        gp = optuna.samplers.GPSampler(seed=seed, n_startup_trials=startup, deterministic_objective=False)
        tpe = optuna.samplers.TPESampler(seed=seed, n_startup_trials=startup, multivariate=True, constant_liar=True)
    return GPWithTPE(gp, tpe)
