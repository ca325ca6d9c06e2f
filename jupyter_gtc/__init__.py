"""jupyter_gtc: Slurm training clusters, jobs, metrics and tuning in JupyterLab.

Importing the package is cheap: the api, IPython, widgets and cloud clients are imported
only where they are used.
"""

__version__ = "0.1.0"


def __getattr__(name: str):
    # `gtc.jobs.get("pretrain")`, `gtc.clusters.list()`, `gtc.models.get("llama@prod")`, imported on first use.
    if name in ("jobs", "clusters", "models", "endpoints"):
        from . import namespaces

        return getattr(namespaces, name)
    raise AttributeError(f"module 'jupyter_gtc' has no attribute {name!r}")


def _jupyter_labextension_paths():
    """Tell JupyterLab where the prebuilt labextension of this package is."""
    return [{"src": "labextension", "dest": "jupyter_gtc"}]


def _jupyter_server_extension_points():
    """Tell the Jupyter server which module holds our server extension. The server imports
    it (and tornado, bokeh) only when it loads the extension, never on `import jupyter_gtc`."""
    return [{"module": "jupyter_gtc.server"}]


def load_ipython_extension(ipython):
    """``%load_ext jupyter_gtc``: the %%gtc_cluster, %%sbatch, %squeue, %scancel and
    %gtc_clusters magics, and live panels for the jobs a cell shows."""
    from .magics import load

    load(ipython)
