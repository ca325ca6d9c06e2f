"""Compute Engine names accelerators one way (``nvidia-h200-141gb``, the ``acceleratorTypes``
resource and a reservation's ``guestAccelerators``), Vertex AI another (the
``AcceleratorType`` enum, ``NVIDIA_H200_141GB``, which our specs use). One table, both ways:
a name missing from it is said to be unknown, never guessed from its spelling (the two do not
follow one rule: ``nvidia-tesla-a100`` is ``NVIDIA_TESLA_A100`` but ``nvidia-h100-mega-80gb``
is ``NVIDIA_H100_MEGA_80GB`` and ``nvidia-b200`` is ``NVIDIA_B200``)."""

from __future__ import annotations

COMPUTE_TO_VERTEX = {
    "nvidia-tesla-k80": "NVIDIA_TESLA_K80",
    "nvidia-tesla-p4": "NVIDIA_TESLA_P4",
    "nvidia-tesla-p100": "NVIDIA_TESLA_P100",
    "nvidia-tesla-v100": "NVIDIA_TESLA_V100",
    "nvidia-tesla-t4": "NVIDIA_TESLA_T4",
    "nvidia-tesla-a100": "NVIDIA_TESLA_A100",
    "nvidia-a100-80gb": "NVIDIA_A100_80GB",
    "nvidia-l4": "NVIDIA_L4",
    "nvidia-h100-80gb": "NVIDIA_H100_80GB",
    "nvidia-h100-mega-80gb": "NVIDIA_H100_MEGA_80GB",
    "nvidia-h200-141gb": "NVIDIA_H200_141GB",
    "nvidia-b200": "NVIDIA_B200",
    "nvidia-gb200": "NVIDIA_GB200",
}
VERTEX_TO_COMPUTE = {vertex: compute for compute, vertex in COMPUTE_TO_VERTEX.items()}


def to_vertex(compute_name: str) -> str | None:
    """Vertex's enum for Compute's name (a full URL's last part is taken), or None when unknown."""
    return COMPUTE_TO_VERTEX.get(compute_name.rsplit("/", 1)[-1])


def to_compute(vertex_name: str) -> str | None:
    """Compute's name for Vertex's enum, or None when unknown."""
    return VERTEX_TO_COMPUTE.get(vertex_name)
