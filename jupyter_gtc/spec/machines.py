"""The machine-type catalogue: what each Google Cloud machine type a training cluster may
use provides. The local backend sizes its Slurm nodes from it."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class MachineType:
    name: str
    vcpus: int
    memory_gb: int
    gpu_type: str | None = None  # the accelerator_type string Vertex uses, e.g. NVIDIA_H100_80GB
    gpu_count: int = 0

    @property
    def gpu_model(self) -> str | None:
        """Short GPU name used as the Slurm GRES type (``gpu:h100:8``)."""
        return GPU_MODELS.get(self.gpu_type) if self.gpu_type else None


GPU_MODELS = {
    "NVIDIA_TESLA_A100": "a100",
    "NVIDIA_A100_80GB": "a100-80gb",
    "NVIDIA_H100_80GB": "h100",
    "NVIDIA_H100_MEGA_80GB": "h100-mega",
    "NVIDIA_H200_141GB": "h200",
    "NVIDIA_B200": "b200",
    "NVIDIA_L4": "l4",
}

# Dense bf16 Tensor Core peak of one GPU, TFLOP/s: what MFU and the health speed check are read
# against. NVIDIA's datasheets print the figure "with sparsity"; dense is half of it.
#   A100 datasheet: BF16 312 dense (624 sparse), SXM and PCIe, 40 and 80 GB alike.
#   H100 datasheet: BF16 1,979 sparse (SXM), 1,513 (PCIe), 1,671 (NVL).
#   H200 datasheet: BF16 1,979 sparse (SXM: the H100's chip), 1,671 (NVL).
#   HGX B200 datasheet: FP16/BF16 36 PFLOPS sparse for 8 GPUs: 2,250 dense each.
#   L4 datasheet: BF16 242.5 sparse.
# The PCIe/NVL parts are in no machine type of the catalogue, but a node may hold them: their
# own figures, not the SXM part's, or MFU reads 30% high.
GPU_PEAK_BF16_TFLOPS = {
    "a100": 312.0, "a100-80gb": 312.0, "h100": 989.5, "h100-mega": 989.5, "h100-pcie": 756.5,
    "h100-nvl": 835.5, "h200": 989.5, "h200-nvl": 835.5, "b200": 2250.0, "l4": 121.0,
}


def gpu_model_of(device_name: str) -> str | None:
    """The catalogue's short GPU name for a device name as CUDA or NVML gives it
    ("NVIDIA H100 80GB HBM3" -> h100, "NVIDIA H100 PCIe" -> h100-pcie, "NVIDIA L40S" -> None)."""
    words = set(re.split(r"[\s_-]+", device_name.upper()))
    for chip in ("B200", "H200", "H100", "A100", "L4"):
        if chip in words:
            if chip in ("H100", "H200") and ({"PCIE", "NVL"} & words):
                return f"{chip.lower()}-{'pcie' if 'PCIE' in words else 'nvl'}"
            if chip == "A100" and "80GB" in words:
                return "a100-80gb"
            return chip.lower()
    return None


def gpu_peak_bf16_tflops(device_name: str) -> float | None:
    """The datasheet's dense bf16 peak of the GPU named ``device_name``, None if not catalogued."""
    model = gpu_model_of(device_name)
    return GPU_PEAK_BF16_TFLOPS.get(model) if model else None

_GPU_MACHINES = [
    MachineType("a2-highgpu-1g", 12, 85, "NVIDIA_TESLA_A100", 1),
    MachineType("a2-highgpu-2g", 24, 170, "NVIDIA_TESLA_A100", 2),
    MachineType("a2-highgpu-4g", 48, 340, "NVIDIA_TESLA_A100", 4),
    MachineType("a2-highgpu-8g", 96, 680, "NVIDIA_TESLA_A100", 8),
    MachineType("a2-megagpu-16g", 96, 1360, "NVIDIA_TESLA_A100", 16),
    MachineType("a2-ultragpu-1g", 12, 170, "NVIDIA_A100_80GB", 1),
    MachineType("a2-ultragpu-2g", 24, 340, "NVIDIA_A100_80GB", 2),
    MachineType("a2-ultragpu-4g", 48, 680, "NVIDIA_A100_80GB", 4),
    MachineType("a2-ultragpu-8g", 96, 1360, "NVIDIA_A100_80GB", 8),
    MachineType("a3-highgpu-1g", 26, 234, "NVIDIA_H100_80GB", 1),
    MachineType("a3-highgpu-2g", 52, 468, "NVIDIA_H100_80GB", 2),
    MachineType("a3-highgpu-4g", 104, 936, "NVIDIA_H100_80GB", 4),
    MachineType("a3-highgpu-8g", 208, 1872, "NVIDIA_H100_80GB", 8),
    MachineType("a3-megagpu-8g", 208, 1872, "NVIDIA_H100_MEGA_80GB", 8),
    MachineType("a3-ultragpu-8g", 224, 2952, "NVIDIA_H200_141GB", 8),
    MachineType("a4-highgpu-8g", 224, 3968, "NVIDIA_B200", 8),
    MachineType("g2-standard-4", 4, 16, "NVIDIA_L4", 1),
    MachineType("g2-standard-8", 8, 32, "NVIDIA_L4", 1),
    MachineType("g2-standard-12", 12, 48, "NVIDIA_L4", 1),
    MachineType("g2-standard-16", 16, 64, "NVIDIA_L4", 1),
    MachineType("g2-standard-24", 24, 96, "NVIDIA_L4", 2),
    MachineType("g2-standard-32", 32, 128, "NVIDIA_L4", 1),
    MachineType("g2-standard-48", 48, 192, "NVIDIA_L4", 4),
    MachineType("g2-standard-96", 96, 384, "NVIDIA_L4", 8),
]

# General-purpose families: vCPU counts offered and GB of memory per vCPU.
_CPU_FAMILIES = {
    "n2-standard": ((2, 4, 8, 16, 32, 48, 64, 80, 96, 128), 4),
    "n2-highmem": ((2, 4, 8, 16, 32, 48, 64, 80, 96, 128), 8),
    "c2-standard": ((4, 8, 16, 30, 60), 4),
}

MACHINE_TYPES: dict[str, MachineType] = {m.name: m for m in _GPU_MACHINES}
for _family, (_sizes, _gb_per_cpu) in _CPU_FAMILIES.items():
    for _n in _sizes:
        MACHINE_TYPES[f"{_family}-{_n}"] = MachineType(f"{_family}-{_n}", _n, _n * _gb_per_cpu)


def lookup(name: str) -> MachineType | None:
    return MACHINE_TYPES.get(name)
