"""A tuning trial's ``python_package_spec`` inside its Slurm job:
``python -m jupyter_gtc.vertex.packages PACKAGE... -- MODULE [ARGS...]`` installs the source
packages into a folder of the job's own (``$GTC_JOB_DIR/python/node-N``, as a CustomJob's
replicas do: ``task.install``), put first on ``PYTHONPATH``, then becomes ``python -m MODULE
ARGS`` (exec: Slurm signals and accounts the trainer itself). pip writes only into that
folder: never into the job's Python environment, which is the kernel's."""

from __future__ import annotations

import os
import sys


def main(argv: list[str]) -> None:
    from .._process import replace_with
    from .task import install

    if "--" not in argv or argv.index("--") == len(argv) - 1:
        raise SystemExit("usage: python -m jupyter_gtc.vertex.packages PACKAGE... -- MODULE [ARGS...]")
    split = argv.index("--")
    packages, (module, *args) = argv[:split], argv[split + 1:]
    env = dict(os.environ)
    if packages:
        target = install(packages, int(env.get("SLURM_NODEID", "0")))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (target, env.get("PYTHONPATH", "")) if p)
    replace_with([sys.executable, "-m", module, *args], env)


if __name__ == "__main__":
    main(sys.argv[1:])
