"""The Python environment a job runs with, so that ``srun torchrun ...`` or ``python -m ...``
in a job finds the programs of the kernel that submitted it, as submitit's jobs do.

By default a job gets the submitting interpreter's environment (``sys.prefix``, when it is a
venv or a conda environment) first on its ``PATH``, and ``VIRTUAL_ENV`` for a venv. Another
environment, or none (sbatch's environment as it is), is chosen per job (``python_env=``,
``--python-env``) or per process (``GTC_JOB_PYTHON_ENV``). Only those two variables are
added: the job gets nothing of the kernel's beyond what sbatch exports anyway.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ..exceptions import SpecError

ENV_VAR = "GTC_JOB_PYTHON_ENV"
OFF = "none"
_VALID = (f"a Python environment: a venv or conda folder with bin/python (or that Python itself), "
          f"or '{OFF}' to run the job with sbatch's PATH as it is")


def chosen_python_env(choice: str | os.PathLike | bool | None, option: str = "python_env") -> Path | None:
    """The environment a job runs with, as an absolute folder; None to change nothing.
    ``choice``: a folder or its Python, ``"none"``/``False`` for none, or None for the
    default: ``GTC_JOB_PYTHON_ENV`` if set, else this interpreter's environment. A value that
    is no Python environment raises ``SpecError`` naming ``option`` (or the variable)."""
    if choice is None:
        if os.environ.get(ENV_VAR, "").strip():
            return chosen_python_env(os.environ[ENV_VAR].strip(), ENV_VAR)
        return _this_environment()
    if choice is False or str(choice).strip().lower() == OFF:
        return None
    if choice is True:
        return _this_environment()
    path = Path(os.path.abspath(Path(choice).expanduser()))
    if path.is_file() and path.parent.name == "bin":  # the environment's Python: .venv/bin/python
        path = path.parent.parent
    if not _python_of(path):
        raise SpecError(option, str(choice), _VALID)
    return path


def python_env_variables(env: Path | None, path: str | None = None) -> dict[str, str]:
    """What a job in ``env`` gets on top of sbatch's environment: ``PATH`` with ``env/bin``
    first (``path``: the PATH sbatch runs with, this process's by default), and
    ``VIRTUAL_ENV`` for a venv. Nothing when ``env`` is None."""
    if env is None:
        return {}
    path = os.environ.get("PATH", os.defpath) if path is None else path
    bin_dir = str(env / "bin")
    rest = [p for p in path.split(os.pathsep) if p and p != bin_dir]
    variables = {"PATH": os.pathsep.join([bin_dir, *rest])}
    if (env / "pyvenv.cfg").is_file():
        variables["VIRTUAL_ENV"] = str(env)
    return variables


def _this_environment() -> Path | None:
    """This interpreter's environment when it is one a job should get: a venv
    (``sys.prefix`` differs from ``sys.base_prefix``) or a conda environment. A system
    Python's prefix (``/usr``) is left alone: putting ``/usr/bin`` first would reorder PATH."""
    prefix = Path(sys.prefix)
    is_venv = sys.prefix != sys.base_prefix or (prefix / "pyvenv.cfg").is_file()
    if (is_venv or (prefix / "conda-meta").is_dir()) and _python_of(prefix):
        return prefix
    return None


def _python_of(env: Path) -> bool:
    """Whether ``env`` has a Python a job can run (``bin/python`` or ``bin/python3``)."""
    return any(os.access(env / "bin" / name, os.X_OK) and (env / "bin" / name).is_file()
               for name in ("python", "python3"))
