"""The per-GPU peak MFU is read against: the machine catalogue's datasheet figure for the GPU
the device name says, not the first table entry whose name it contains."""

from __future__ import annotations

import pytest

from jupyter_gtc.recipes.metrics import gpu_peak_flops
from jupyter_gtc.spec.machines import GPU_MODELS, GPU_PEAK_BF16_TFLOPS


@pytest.mark.parametrize("name, tflops", [
    ("NVIDIA H200", 989.5), ("NVIDIA H100 80GB HBM3", 989.5), ("NVIDIA A100-SXM4-40GB", 312.0),
    ("NVIDIA A100-SXM4-80GB", 312.0), ("NVIDIA L4", 121.0),
    ("NVIDIA B200", 2250.0),        # was missing: no MFU at all on a4-highgpu-8g
    ("NVIDIA H100 PCIe", 756.5),    # was the SXM part's 989: MFU read 24% low
    ("NVIDIA H200 NVL", 835.5),
    ("NVIDIA L40S", None),          # was the L4's 121 ("L4" in "L40S"): MFU read 3x high
    ("NVIDIA A10G", None),          # was the A10's 125, a different part
])
def test_mfu_peak_per_gpu(name, tflops):
    assert gpu_peak_flops(name) == (tflops * 1e12 if tflops else 0.0)


def test_every_gpu_of_the_machine_catalogue_has_a_peak():
    assert set(GPU_MODELS.values()) <= set(GPU_PEAK_BF16_TFLOPS)
