"""Container runtimes, behind one seam: what this machine (or an attached cluster) can run
images with (``runtime.py``), an image had from a registry, a local archive or an OCI layout
(``images.py``), and the argument list that runs a task in one (``argv.py``)."""
