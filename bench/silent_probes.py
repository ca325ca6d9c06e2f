"""False positives of the supervisor's partition detection under load: a supervised 2-node
cluster of namespace-mode nodes (root) that nobody cuts off, for ``--minutes``, while this
machine is busy (whatever load you start beside it: busy loops, a test run). Prints how many of
its live nodes were cut off anyway (its "unreachable" events: each a false positive), and how
long a live node's probe took to be answered, slowest and 99th percentile, against the probe's
timeout (``PROBE_TIMEOUT_S``): the margin a merely slow machine leaves before a probe counts as silence.

    .venv/bin/python bench/silent_probes.py [--minutes 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=3.0)
    args = parser.parse_args()
    home = os.environ["GTC_HOME"] = tempfile.mkdtemp(prefix="gtc-bench-")
    from jupyter_gtc import api
    from jupyter_gtc.backends.local import LocalBackend
    from jupyter_gtc.backends.supervisor import PROBE_TIMEOUT_S, SILENT_PROBES
    from jupyter_gtc.state import open_store
    from tests.conftest import small_gpu_spec

    name = "probes"
    seconds: list[float] = []
    silent = 0
    try:
        cluster = api.create_cluster(small_gpu_spec(name, nodes=2, supervisor=True, network="namespaces"))
        backend, runtime = LocalBackend(Path(home)), open_store(Path(home)).get_cluster(name).runtime
        deadline = time.monotonic() + args.minutes * 60
        while time.monotonic() < deadline:
            for node in (n.name for n in cluster.nodes):
                began = time.monotonic()
                answered = backend.node_answers(runtime, node, timeout=PROBE_TIMEOUT_S)
                seconds.append(time.monotonic() - began)
                silent += not answered
            time.sleep(0.1)
        cut_off = [e for e in api.cluster_events(name) if e["event"] == "unreachable"]
    finally:
        for c in api.list_clusters(with_status=False):
            api.delete_cluster(c.name)
        shutil.rmtree(home, ignore_errors=True)
    seconds.sort()
    load = os.getloadavg()
    print(f"a supervised 2-node cluster left alone for {args.minutes:g} minutes, load average now "
          f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    print(f"  live nodes cut off (false positives): {len(cut_off)}"
          + "".join(f"\n    {e['node']}: {e['detail']}" for e in cut_off))
    print(f"  probes of live nodes: {len(seconds)}, unanswered within {PROBE_TIMEOUT_S:g} s: {silent} "
          f"(a node is cut off after {SILENT_PROBES} in a row)")
    print(f"  answer time: median {statistics.median(seconds) * 1000:.2f} ms, "
          f"p99 {seconds[int(len(seconds) * 0.99)] * 1000:.2f} ms, slowest {seconds[-1] * 1000:.2f} ms "
          f"({seconds[-1] / PROBE_TIMEOUT_S:.1%} of the timeout)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
