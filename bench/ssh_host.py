"""The SSH host's cost per call: a command over its one shared connection against a plain
``ssh HOST true`` per command (a new connection each, as most tools do), and its file
operations (``stat``, a 1 MiB ``read``, which run the remote Python), interleaved against a
real sshd on this machine (tests/hosts/sshd.py; as root).

    .venv/bin/python bench/ssh_host.py [--n 50]

Prints median and p95 of each and the ratio to the plain ssh baseline measured in this run.
Issue 13's goal: a command over the shared connection at most 0.3x the plain one's median.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.hosts.sshd import start_sshd  # noqa: E402  (the test server, reused as is)

from jupyter_gtc.hosts.ssh import SSHHost  # noqa: E402


def p95(values: list[float]) -> float:
    return sorted(values)[max(0, int(len(values) * 0.95) - 1)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=50)
    args = parser.parse_args()
    if os.getuid() != 0:
        sys.exit("run as root: the test sshd needs /run/sshd")
    root = Path(tempfile.mkdtemp(prefix="gtc-bench-ssh-"))
    server = start_sshd(root / "sshd")
    data = root / "data.bin"
    data.write_bytes(os.urandom(1 << 20))
    host = SSHHost(server.alias, config_file=server.config, control_dir=root / "ctl")
    host.run(["true"])  # the shared connection opens once, before timing
    plain_ssh = ["ssh", "-F", str(server.config), "-o", "BatchMode=yes", server.alias, "true"]
    timings: dict[str, list[float]] = {"plain ssh, new connection": [], "ours: run(true)": [],
                                       "ours: stat": [], "ours: read 1 MiB": []}
    calls = [lambda: subprocess.run(plain_ssh, check=True, capture_output=True),
             lambda: host.run(["true"]), lambda: host.stat(data), lambda: host.read(data, 0, 1 << 20)]
    try:
        for _ in range(args.n):
            for name, call in zip(timings, calls):
                t0 = time.perf_counter()
                call()
                timings[name].append(time.perf_counter() - t0)
    finally:
        host.close()
        server.stop()
    base = statistics.median(timings["plain ssh, new connection"])
    print(f"{'call':28} {'median ms':>10} {'p95 ms':>8} {'x plain':>8}   (n={args.n}, interleaved)")
    for name, values in timings.items():
        median = statistics.median(values)
        print(f"{name:28} {median * 1e3:10.1f} {p95(values) * 1e3:8.1f} {median / base:8.2f}")
    print(f"logins to sshd: {server.logins()} (plain ssh: one per call; ours: 1)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
