"""The installed package as JupyterLab and a fresh interpreter see it."""

import subprocess
import sys


def test_labextension_is_installed_and_enabled():
    result = subprocess.run([sys.executable, "-m", "jupyter", "labextension", "list"],
                            capture_output=True, text=True, timeout=120)
    listing = result.stdout + result.stderr  # jupyter prints the list on stderr
    line = next((line for line in listing.splitlines() if "jupyter_gtc" in line), "")
    assert "enabled" in line and "OK" in line, listing


def test_importing_the_package_stays_light():
    code = ("import sys, time; t = time.perf_counter(); import jupyter_gtc.api; "
            "heavy = [m for m in ('IPython', 'ipywidgets', 'bokeh', 'tornado', 'google.cloud.aiplatform', 'torch') "
            "if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.strip() == "[]"
