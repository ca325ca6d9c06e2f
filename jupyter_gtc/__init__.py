"""jupyter_gtc: Slurm training clusters, jobs, metrics and tuning in JupyterLab.

Importing the package is cheap: the api, IPython, widgets and cloud clients are imported
only where they are used.
"""

__version__ = "0.1.0"


def _jupyter_labextension_paths():
    """Tell JupyterLab where the prebuilt labextension of this package is."""
    return [{"src": "labextension", "dest": "jupyter_gtc"}]
