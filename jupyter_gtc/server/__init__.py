"""The Jupyter server extension: routes that JupyterLab and notebook outputs load from.

Enabled by ``etc/jupyter/jupyter_server_config.d/jupyter_gtc.json`` (shipped in the wheel);
``jupyter server extension list`` shows it. Only the server imports this package.
"""

from __future__ import annotations


def _load_jupyter_server_extension(serverapp) -> None:
    """Called once by the Jupyter server at start-up: add our routes to its web app."""
    from .routes import setup_routes

    setup_routes(serverapp.web_app)
    base_url = serverapp.web_app.settings["base_url"]
    serverapp.log.info("jupyter_gtc: REST API under %sgtc/api/, BokehJS under %sgtc/static/bokeh/", base_url, base_url)
