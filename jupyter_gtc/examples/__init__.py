"""Example programs shipped inside the package, so that a notebook or a job finds them from
any folder, in a checkout or an installed wheel alike.

In a job (whose PATH has the submitting kernel's Python first, see ``services/job_env.py``)::

    python -m jupyter_gtc.examples.tiny_regression --steps 300

or by path, for a program that must be given as a file: ``examples.path("tiny_regression.py")``.
Importing this package imports none of the programs (nor torch).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

__all__ = ["path"]


def path(name: str) -> Path:
    """The file of the example program ``name`` (``tiny_regression.py``)."""
    found = resources.files(__name__) / name
    if not found.is_file():
        known = sorted(p.name for p in resources.files(__name__).iterdir() if p.name.endswith(".py")
                       and not p.name.startswith("_"))
        raise FileNotFoundError(f"no example program {name!r} in jupyter_gtc.examples; there are: {', '.join(known)}")
    return Path(str(found))
