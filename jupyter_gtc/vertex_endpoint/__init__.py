"""A local endpoint that speaks Vertex AI's REST API (``JobService``: customJobs and their
operations) to the official ``google-cloud-aiplatform`` SDK, unpatched, and runs the jobs on
a cluster of ours. ``gtc vertex serve`` and ``%gtc_vertex_local`` start it (``server.py``)."""
