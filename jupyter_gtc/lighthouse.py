"""The lighthouse of a job that restarts inside itself (``jupyter_gtc.injob``): the store where
each restart's processes meet. Started by the batch script, on the batch host, so it lives as
long as the job does (a process of the training, had it held the store, would take it with it
when it died: NVRx's rank 0 has this limit; torchft runs its lighthouse apart too).

    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])')
    export GTC_LIGHTHOUSE="$(hostname):$port"
    python3 -m jupyter_gtc.lighthouse "$port" &

It ends a few seconds after the training says it is done (the spares read that), or with the
job's batch step.
"""

from __future__ import annotations

import sys
import time
from datetime import timedelta

LINGER_S = 10.0  # after "done": time for every spare to read it


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not args[0].isdigit() or not 0 < int(args[0]) < 65536:
        print(f"usage: python -m jupyter_gtc.lighthouse PORT (a TCP port, 1-65535; got {' '.join(args) or 'none'})",
              file=sys.stderr)
        return 2
    from torch.distributed import TCPStore

    store = TCPStore("0.0.0.0", int(args[0]), is_master=True, wait_for_workers=False,
                     timeout=timedelta(seconds=60))
    while not store.check(["done"]):
        time.sleep(0.5)
    time.sleep(LINGER_S)
    return 0


if __name__ == "__main__":
    sys.exit(main())
