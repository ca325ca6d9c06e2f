"""The Jupyter server extension: routes that JupyterLab and notebook outputs load from.

Enabled by ``etc/jupyter/jupyter_server_config.d/jupyter_gtc.json`` (shipped in the wheel);
``jupyter server extension list`` shows it. Only the server imports this package.
"""

from __future__ import annotations

import time


def _load_jupyter_server_extension(serverapp) -> None:
    """Called once by the Jupyter server at start-up: add our routes to its web app."""
    from .. import api
    from .routes import setup_routes

    setup_routes(serverapp.web_app)
    base_url = serverapp.web_app.settings["base_url"]
    serverapp.log.info("jupyter_gtc: REST API under %sgtc/api/, BokehJS under %sgtc/static/bokeh/", base_url, base_url)
    api.cluster_operations().subscribe(lambda op: _log_operation(serverapp.log, op))


def _log_operation(log, op) -> None:
    """Each step of a create, scale or delete started from the sidebar, in the server's log:
    the one place that says where a slow or failed one spent its time."""
    elapsed = (op.finished_at or time.time()) - op.started_at
    if op.error is not None:
        log.warning("jupyter_gtc: %s %s failed after %.1f s: %s", op.action, op.cluster, elapsed, op.error)
    else:
        log.info("jupyter_gtc: %s %s %s (%.1f s)", op.action, op.cluster,
                 "done" if op.finished else op.message or "started", elapsed)
