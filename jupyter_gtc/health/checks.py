"""Health checks, each a small function of a ``NodeContext`` returning a ``CheckResult``.

GPU checks read NVML (``nvidia-ml-py``); where there is no NVIDIA GPU they say "n/a", never
"pass". Faults are injected for tests through files in the folder ``GTC_FAULT_DIR`` names,
which jupyter_gtc sets only for a local cluster's nodes (``<cluster>/faults/<node>``, written
by ``%gtc_fault``): where it is unset, as on every real node, no fault file counts, so no injection can
be left switched on in production. A fault file's text is the evidence the check reports
("injected: <text>").
"""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

PASS, WARN, FAIL, NA = "pass", "warn", "fail", "n/a"
FAULTS = ("ecc", "xid", "slow", "disk_full", "hang")  # what a fault file can inject; crash and partition are the backend's
# XIDs that mean the GPU or its memory needs a reset or a replacement (NVIDIA's XID catalogue):
# 48 double-bit ECC, 63/64 row remapping, 74 NVLink, 79 fell off the bus, 92 high single-bit
# ECC rate, 94/95 contained/uncontained ECC, 119/120 GSP, 140 unrecovered ECC.
CRITICAL_XIDS = frozenset({48, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140})


@dataclass(frozen=True)
class CheckResult:
    check: str
    verdict: str          # pass, warn, fail or n/a
    evidence: str         # what was seen, in a line: a user reads it in the health table
    seconds: float = 0.0

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class NodeHealth:
    """One run of the checks on a node: when, and what each found."""

    node: str
    time: float                     # seconds since the epoch, as the run ended
    results: tuple[CheckResult, ...]

    @property
    def verdict(self) -> str:
        """fail if any check failed, warn if any warned, else pass (n/a counts as nothing)."""
        verdicts = {r.verdict for r in self.results}
        return FAIL if FAIL in verdicts else WARN if WARN in verdicts else PASS

    @classmethod
    def from_json(cls, data: dict) -> "NodeHealth":
        return cls(data["node"], float(data["time"]), tuple(CheckResult(**r) for r in data["results"]))


@dataclass(frozen=True)
class NodeContext:
    """What the checks of one node look at."""

    paths: tuple[str, ...] = ()       # filesystems jobs write to (job folders, checkpoints)
    fault_dir: str | None = None      # the node's fault folder (local clusters only)
    warn_free: float = 0.10           # free-space fractions below which disk warns and fails
    fail_free: float = 0.02
    fail_free_bytes: int = 1 << 30    # and fails below 1 GiB free, whatever the fraction
    extra: dict = field(default_factory=dict)

    def injected(self, fault: str) -> str | None:
        """The fault file's text (or "injected") where this node's fault folder holds one."""
        if not self.fault_dir:
            return None
        path = os.path.join(self.fault_dir, fault)
        try:
            with open(path) as f:
                return f.read().strip() or fault
        except FileNotFoundError:
            return None


def _result(check: str, verdict: str, evidence: str) -> CheckResult:
    return CheckResult(check, verdict, evidence)


def _nvml():
    """NVML and the node's GPU handles, or (None, why there are none)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        count = pynvml.nvmlDeviceGetCount()
    except ImportError:
        return None, "no NVML here (nvidia-ml-py is not installed)"
    except Exception as e:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return None, f"no NVIDIA GPU ({e})"
    if count == 0:
        return None, "no NVIDIA GPU (NVML sees 0 devices)"
    return (pynvml, [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]), ""


def check_ecc(ctx: NodeContext) -> CheckResult:
    """Uncorrected ECC errors since the driver loaded fail; uncorrected ones over the GPU's
    life, or pages waiting to be retired, warn (the GPU needs a reset soon)."""
    if (text := ctx.injected("ecc")) is not None:
        return _result("ecc", FAIL, f"injected: {text}")
    found, why = _nvml()
    if found is None:
        return _result("ecc", NA, why)
    nvml, gpus = found
    fails, warns = [], []
    for i, gpu in enumerate(gpus):
        try:
            volatile = nvml.nvmlDeviceGetTotalEccErrors(gpu, nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                                                        nvml.NVML_VOLATILE_ECC)
            aggregate = nvml.nvmlDeviceGetTotalEccErrors(gpu, nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                                                         nvml.NVML_AGGREGATE_ECC)
        except nvml.NVMLError_NotSupported:
            continue
        if volatile:
            fails.append(f"GPU {i}: {volatile} uncorrected ECC errors since boot")
        elif aggregate:
            warns.append(f"GPU {i}: {aggregate} uncorrected ECC errors over its life")
        try:
            if nvml.nvmlDeviceGetRetiredPagesPendingStatus(gpu):
                warns.append(f"GPU {i}: retired pages pending (reset the GPU)")
        except nvml.NVMLError:
            pass
    if fails:
        return _result("ecc", FAIL, "; ".join(fails + warns))
    if warns:
        return _result("ecc", WARN, "; ".join(warns))
    return _result("ecc", PASS, f"{len(gpus)} GPUs, no uncorrected ECC errors")


def check_xid(ctx: NodeContext) -> CheckResult:
    """Critical XID errors in the kernel log (the driver's "NVRM: Xid" lines) fail."""
    if (text := ctx.injected("xid")) is not None:
        return _result("xid", FAIL, f"injected: {text}")
    found, why = _nvml()
    if found is None:
        return _result("xid", NA, why)
    try:
        log = _kernel_log()
    except Exception as e:  # noqa: BLE001 - dmesg restricted, no journal
        return _result("xid", WARN, f"cannot read the kernel log: {e}")
    return xid_verdict(log)


def xid_verdict(kernel_log: str) -> CheckResult:
    """The XID check's verdict on a kernel log's text."""
    critical = sorted({x for x in _xids(kernel_log) if x in CRITICAL_XIDS})
    if critical:
        return _result("xid", FAIL, f"critical XIDs in the kernel log: {', '.join(map(str, critical))}")
    return _result("xid", PASS, "no critical XID in the kernel log")


def _xids(log: str) -> list[int]:
    """The XID numbers of ``NVRM: Xid (PCI:0000:3b:00): 79, pid=..., GPU has fallen off the bus``."""
    out = []
    for line in log.splitlines():
        if "NVRM: Xid" in line and "):" in line:
            number = line.split("):", 1)[1].split(",", 1)[0].strip()
            if number.isdigit():
                out.append(int(number))
    return out


def _kernel_log() -> str:
    from .. import _process

    return _process.run(["dmesg"], timeout=10).stdout


# The speed check's thresholds, as fractions of the datasheet's dense bf16 peak
# (spec/machines.GPU_PEAK_BF16_TFLOPS). A healthy GPU runs an 8192^3 bf16 matmul at about 0.8
# of it (769-798 TFLOP/s measured on an H200, peak 989.5; A100s about 0.85-0.9, B200s about
# 0.7): below SPEED_WARN a GPU is throttled (clocks, power, heat), below SPEED_FAIL it is broken.
SPEED_WARN, SPEED_FAIL = 0.60, 0.40
PEER_FAIL = 0.5  # and a GPU at half the speed of the node's fastest fails, whatever its model
SPEED_N = 8192   # the matmul's size: large enough to run at the Tensor Cores' rate


def speed_verdict(readings: list[tuple[str, float]]) -> CheckResult:
    """The speed check's verdict on each GPU's (device name, measured bf16 TFLOP/s)."""
    from ..spec.machines import gpu_peak_bf16_tflops

    fastest = max(t for _, t in readings)
    worst, lines = PASS, []
    for i, (name, tflops) in enumerate(readings):
        peak = gpu_peak_bf16_tflops(name)
        line = f"GPU {i} {name}: {tflops:.0f} TFLOP/s bf16"
        verdict = PASS
        if peak:
            line += f" ({tflops / peak:.0%} of its datasheet {peak:g})"
            verdict = FAIL if tflops < SPEED_FAIL * peak else WARN if tflops < SPEED_WARN * peak else PASS
        else:
            line += " (no datasheet figure for this model: compared with its peers only)"
        if tflops < PEER_FAIL * fastest:
            verdict, line = FAIL, line + f", under half the fastest GPU's {fastest:.0f}"
        worst = max(worst, verdict, key=[PASS, WARN, FAIL].index)
        lines.append(line)
    return _result("speed", worst, "; ".join(lines))


def _gpu_matmul_tflops(torch, index: int, n: int = SPEED_N, seconds: float = 0.3) -> float:
    """bf16 n x n x n matmuls on GPU ``index`` for about ``seconds``, timed with CUDA events."""
    device = torch.device("cuda", index)
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    for _ in range(3):  # warm up: cuBLAS picks its kernel, clocks rise
        a @ b
    torch.cuda.synchronize(device)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    runs = 10
    while True:
        start.record()
        for _ in range(runs):
            a @ b
        end.record()
        end.synchronize()
        elapsed = start.elapsed_time(end) / 1000
        if elapsed >= seconds:
            return 2 * n**3 * runs / elapsed / 1e12
        runs *= 2


def _gpu_speed() -> CheckResult | None:
    """Each GPU's matmul speed against its datasheet peak, or None where the node has no GPU."""
    if _nvml()[0] is None:
        return None
    try:
        import torch
    except ImportError:
        return _result("speed", NA, "the GPUs' speed is not measured: torch is not installed here")
    if not torch.cuda.is_available():
        return _result("speed", NA, "NVML sees GPUs but torch.cuda does not (a CPU-only build of torch?)")
    return speed_verdict([(torch.cuda.get_device_name(i), _gpu_matmul_tflops(torch, i))
                          for i in range(torch.cuda.device_count())])


def check_speed(ctx: NodeContext) -> CheckResult:
    """A matmul's speed: on GPUs, each against its model's datasheet peak and against the
    fastest of its peers (``speed_verdict``); on a CPU-only node, the measured GFLOP/s as evidence."""
    if (text := ctx.injected("slow")) is not None:
        return _result("speed", FAIL, f"injected: {text}")
    if (gpus := _gpu_speed()) is not None:
        return gpus
    import numpy as np

    n = 512
    a = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)
    a @ a  # warm up
    start, runs = time.perf_counter(), 0
    while time.perf_counter() - start < 0.2:
        a @ a
        runs += 1
    gflops = 2 * n**3 * runs / (time.perf_counter() - start) / 1e9
    return _result("speed", PASS, f"CPU matmul {gflops:.1f} GFLOP/s (float32, {n}x{n})")


def check_correctness(ctx: NodeContext) -> CheckResult:
    """A deterministic computation's digest: the caller compares it across nodes (a node
    whose digest differs from the others' computes wrong: silent data corruption). On a GPU
    node each GPU computes it too, and GPUs of one model must agree (``digests_verdict``)."""
    import numpy as np

    a = np.random.default_rng(1234).standard_normal((256, 256))
    digest = hashlib.sha256(np.ascontiguousarray(a @ a.T).tobytes()).hexdigest()[:16]
    gpus = _gpu_digests(a) if _nvml()[0] is not None else None
    if not gpus:
        return _result("correctness", PASS, f"digest {digest}")
    result = digests_verdict(gpus)
    return _result("correctness", result.verdict, f"digest {digest}; {result.evidence}")


def _gpu_digests(a) -> list[tuple[str, str]] | None:
    """Each GPU's digest of the same fp32 product (TF32 off: exact IEEE products), or None
    where torch cannot reach the GPUs (the speed check says why)."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    found = []
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        for i in range(torch.cuda.device_count()):
            x = torch.from_numpy(a.astype("float32")).to(torch.device("cuda", i))
            product = (x @ x.T).cpu().numpy()
            found.append((torch.cuda.get_device_name(i), hashlib.sha256(product.tobytes()).hexdigest()[:16]))
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    return found


def digests_verdict(gpus: list[tuple[str, str]]) -> CheckResult:
    """GPUs of one model computing the same product must give the same bits: a GPU whose
    digest differs from the most common one of its model fails (models may differ: their
    kernels do)."""
    from collections import Counter

    lines, bad = [], []
    for model in dict.fromkeys(name for name, _ in gpus):
        mine = [(i, d) for i, (name, d) in enumerate(gpus) if name == model]
        usual = Counter(d for _, d in mine).most_common(1)[0][0]
        odd = [i for i, d in mine if d != usual]
        lines.append(f"{len(mine)} x {model}: GPU digest {usual}")
        bad += [f"GPU {i} computes {dict(mine)[i]}, not {usual} as the other {model} do" for i in odd]
    if bad:
        return _result("correctness", FAIL, "; ".join(bad + lines))
    return _result("correctness", PASS, "; ".join(lines))


def check_disk(ctx: NodeContext) -> CheckResult:
    """Free space on the filesystems jobs write to."""
    if ctx.injected("hang") is not None:
        threading.Event().wait()  # injected: as statvfs blocks on a hung NFS mount, for ever
    if (text := ctx.injected("disk_full")) is not None:
        return _result("disk", FAIL, f"injected: {text}")
    if not ctx.paths:
        return _result("disk", NA, "no job or checkpoint folder given")
    worst, lines = PASS, []
    for path in ctx.paths:
        try:
            usage = shutil.disk_usage(path)
        except OSError as e:
            worst = FAIL
            lines.append(f"{path}: {e.strerror}")
            continue
        free = usage.free / usage.total if usage.total else 0.0
        verdict = (FAIL if free < ctx.fail_free or usage.free < ctx.fail_free_bytes
                   else WARN if free < ctx.warn_free else PASS)
        worst = max(worst, verdict, key=[PASS, WARN, FAIL].index)
        lines.append(f"{path}: {usage.free / (1 << 30):.1f} GiB free ({free:.0%})")
    return _result("disk", worst, "; ".join(lines))


CHECKS: dict[str, Callable[[NodeContext], CheckResult]] = {
    "ecc": check_ecc, "xid": check_xid, "speed": check_speed, "correctness": check_correctness, "disk": check_disk,
}
