"""Where a run's seconds go before its first step: one line in the job's log, from the job's own clock.

A requeued job pays its whole start again (issue 29: 14-21 s from a node fault to the first new
step, of which the job is placed again after 3.5 s). The line says which part is which, so a
restart's cost is read from the log, not guessed:

    startup 6.1 s to step 21: launch 0.3, imports 3.1, data 0.6, model 0.9, checkpoint 0.1, first step 0.2 (restart 1)

``launch`` runs from the batch script's start (``GTC_ATTEMPT_STARTED``, which the recipes' sbatch
script exports from bash's ``$EPOCHREALTIME``) to the program's first line: srun, and torchrun where
there is one. It is left out where the program was started some other way. Stdlib only: the
clock starts before torch is imported.
"""

from __future__ import annotations

import os
import time

ATTEMPT_STARTED_ENV = "GTC_ATTEMPT_STARTED"


class StartupClock:
    def __init__(self, python_up: float | None = None):
        self.began = time.time() if python_up is None else python_up
        self.parts: list[tuple[str, float]] = []
        started = os.environ.get(ATTEMPT_STARTED_ENV, "")
        try:
            attempt = float(started)
        except ValueError:
            attempt = None
        if attempt is not None and attempt <= self.began:
            self.parts.append(("launch", self.began - attempt))
            self.began = attempt
        self._last = time.time() if python_up is None else python_up

    def mark(self, part: str) -> None:
        """The seconds since the previous mark go to ``part`` (added up when it repeats)."""
        now = time.time()
        for i, (name, seconds) in enumerate(self.parts):
            if name == part:
                self.parts[i] = (name, seconds + now - self._last)
                break
        else:
            self.parts.append((part, now - self._last))
        self._last = now

    def line(self, step: int) -> str:
        total = self._last - self.began
        parts = ", ".join(f"{name} {seconds:.1f}" for name, seconds in self.parts)
        restart = os.environ.get("SLURM_RESTART_COUNT")
        return f"startup {total:.1f} s to step {step}: {parts}" + (f" (restart {restart})" if restart else "")
