"""Training scalars in TensorBoard's format, where jupyter_gtc's plots and TensorBoard read them.

Rank 0 writes: train/loss, train/lr, train/grad_norm, perf/tokens_per_s, perf/mfu, and
progress/total_steps once (the job panel's progress bar).
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from ..spec.machines import gpu_peak_bf16_tflops
from .models import ModelShape

CPU_CLOCK_HZ = 3e9  # a typical server core's clock: the estimate is rough on CPUs


def _cpu_core_peak_flops() -> float:
    """Two FMA units per core, each 16 fp32 lanes wide with AVX-512 (8 with AVX2), at ~3 GHz."""
    try:
        avx512 = "avx512f" in open("/proc/cpuinfo").read()
    except OSError:
        avx512 = False
    return 2 * 2 * (16 if avx512 else 8) * CPU_CLOCK_HZ


def gpu_peak_flops(device_name: str) -> float:
    """Dense bf16 peak FLOP/s of one GPU, from the machine catalogue's datasheet figures; 0 for
    a GPU it does not know (no MFU then, rather than one read against another part's peak)."""
    tflops = gpu_peak_bf16_tflops(device_name)
    return tflops * 1e12 if tflops else 0.0


def peak_flops(device: torch.device) -> tuple[float, str]:
    """(peak FLOP/s of one device, its name) for the MFU estimate."""
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        return gpu_peak_flops(name), name
    return _cpu_core_peak_flops() * torch.get_num_threads(), f"cpu x{torch.get_num_threads()} threads"


class TrainingMetrics:
    def __init__(self, log_dir: Path, shape: ModelShape, device: torch.device, world_size: int,
                 enabled: bool, total_steps: int, first_step: int = 1):
        self.shape, self.world_size = shape, world_size
        self.peak, self.device_name = peak_flops(device)
        self.writer = None
        if enabled:
            from torch.utils.tensorboard import SummaryWriter
            # purge_step: on a resume, TensorBoard drops what the killed run wrote after the checkpoint.
            self.writer = SummaryWriter(str(log_dir), purge_step=first_step if first_step > 1 else None)
            self.writer.add_scalar("progress/total_steps", total_steps, 0)
        self._last = time.perf_counter()

    def step(self, step: int, *, loss: float, lr: float, grad_norm: float, tokens: int) -> dict[str, float]:
        now = time.perf_counter()
        seconds, self._last = now - self._last, now
        tokens_per_s = tokens / seconds
        values = {"train/loss": loss, "train/lr": lr, "train/grad_norm": grad_norm, "perf/tokens_per_s": tokens_per_s}
        if self.peak:
            values["perf/mfu"] = self.shape.flops_per_token() * tokens_per_s / (self.peak * self.world_size)
        if self.writer is not None:
            for tag, value in values.items():
                self.writer.add_scalar(tag, value, step)
        return values

    def flush(self) -> None:
        """Write what is buffered now: at a checkpoint, so a run killed after it has every step
        up to it in its metrics (the writer otherwise flushes every 2 minutes)."""
        if self.writer is not None:
            self.writer.flush()

    def restart_clock(self) -> None:
        """Not counting a checkpoint save or an evaluation as training time."""
        self._last = time.perf_counter()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
