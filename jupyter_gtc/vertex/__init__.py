"""What runs inside a Vertex AI CustomJob's tasks on Slurm (``task.py``). The resource
itself, its parsing and its states, are ``services/vertex.py``'s; the HTTP endpoint is
``vertex_endpoint/``."""
