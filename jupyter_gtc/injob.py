"""Restart inside the job: when a process or a node of a multi-node job dies, the others keep
their processes (torch imported, model built, state in memory), take a warm spare in its place
and train on from the newest in-memory snapshot, held by every surviving peer. No requeue, no
new process, no disk read.

    #SBATCH --nodes=2 --ntasks-per-node=2 --no-kill --requeue
    python3 -m jupyter_gtc.lighthouse srun --no-kill --kill-on-bad-exit=0 --distribution=cyclic python3 train.py

    from jupyter_gtc.resume import in_job

    model, optimizer = build()                       # every process, spares too: they wait warm
    def train(world):                                # called again, in the same process, after a fault
        for step in range(world.start, steps + 1):   # world.rank, world.size: the active ranks
            ...                                       # collectives on torch.distributed's default group
            world.snapshot(step)                      # the state in memory (cheap: a copy, no disk)
    in_job(train, spares=2, model=model, optimizer=optimizer)

How (the design of NVIDIA's resiliency extension's in-process restart, ``inprocess.Wrapper``
with reserve ranks, and of torchft's lighthouse and live recovery from a peer, written anew
for torch.distributed on CPUs (gloo) and GPUs):

- Slurm places the job, as ever: ``SLURM_NTASKS`` processes, of which ``spares`` wait. The
  job asks Slurm to keep running when a node fails (``--no-kill``: slurmctld then removes the
  node from the job, job_mgr.c ``kill_running_job_by_node_name``; srun marks its tasks ended).
- A lighthouse (a ``TCPStore``, ``jupyter_gtc.lighthouse``, which runs srun) runs in the
  batch script, on the batch host, so it lives as long as the job does. Each restart is a generation: its members meet there, and ``size``
  of them (each old rank kept by its holder, a lost one taken by a spare on its node where one
  is left: NVRx's ``FillGaps`` and ``Tree``) form a new process group under the generation's
  own key prefix; the rest wait.
- A fault is a collective that fails (a dead peer's connection closes at once; a silent one
  after ``collective_timeout_s``). The process that sees it asks for the next generation;
  the waiting spares see the request within 20 ms and join.
- State: each active keeps its newest ``snapshot`` in memory (bytes, tensors and plain data:
  ``torch.load(weights_only=True)`` reads them back, nothing is unpickled). Data-parallel ranks
  hold the same state, so a peer's copy survives any fault that leaves one active rank
  (Gemini's redundant in-memory state, which data parallelism gives for free); the newest one
  among the new members is broadcast over the new group. A disk checkpoint (``checkpoints``)
  is read only where it is newer: the job's first start, or every active rank lost at once.
- When fewer than ``size`` processes are left after ``timeout_s``, every process of the job
  exits with status 75 (``EXIT_REQUEUE``) and the lighthouse requeues the job
  (``scontrol requeue``): ``--no-kill`` stopped Slurm from doing it when the node failed. The
  next attempt resumes from the disk checkpoint, as a requeued job always did.

Run without a lighthouse or as one process, ``train`` is called once with a world of one.
Not covered: a hung process that holds the GIL (NVRx kills those from a monitor process);
the loss of the batch host (the lighthouse's: the job is requeued); NCCL's communicators are
aborted by destroying the process group only.
"""

from __future__ import annotations

import io
import json
import os
import socket
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Callable

LIGHTHOUSE_ENV = "GTC_LIGHTHOUSE"  # host:port of the job's lighthouse
# The exit status of every process of a job that cannot carry on in its processes (EX_TEMPFAIL):
# the batch script requeues the job on it, and the next attempt resumes from the disk checkpoint.
EXIT_REQUEUE = 75
SETTLE_S = 0.5  # a generation closes once this long passes without a new member (the dead never come)
POLL_S = 0.02


class InJobFailed(RuntimeError):
    """The job cannot train on in its processes (too few left, a member that never joined)."""


@dataclass
class World:
    """One generation's view, given to ``train``: this process's ``rank`` of ``size`` active
    ranks, the ``start`` step (one past the snapshot it resumed from; 1 on a first start)."""
    rank: int
    size: int
    start: int
    generation: int
    process: int  # SLURM_PROCID: which of the job's processes this is
    _keeper: "InJob" = field(repr=False)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def snapshot(self, step: int) -> None:
        """Keep the state after ``step`` in memory: what a restart resumes from."""
        self._keeper._snapshot(step)


class InJob:
    def __init__(self, *, spares: int | None = None, checkpoints: Any = None, timeout_s: float = 30.0,
                 collective_timeout_s: float = 30.0, max_restarts: int = 10, **stateful: Any):
        """``spares``: how many of the job's processes wait (default ``$GTC_SPARES``, else 0);
        ``checkpoints``: a ``resume.Checkpoints`` read where it is newer than memory;
        ``timeout_s``: how long a restart waits for enough processes before the job is requeued;
        ``stateful``: objects with ``state_dict``/``load_state_dict`` (model, optimizer...)."""
        self.process = int(os.environ.get("SLURM_PROCID", "0"))
        self.total = int(os.environ.get("SLURM_NTASKS", "1"))
        if spares is None:
            said = os.environ.get("GTC_SPARES", "0")
            if not said.isdigit():
                raise ValueError(f"GTC_SPARES={said!r}: a whole number of the job's processes that wait (0 or more)")
            spares = int(said)
        self.spares = spares
        if not 0 <= self.spares < self.total and self.total > 1:
            raise ValueError(f"spares={self.spares}: the job has {self.total} processes (SLURM_NTASKS); "
                             f"between 0 and {self.total - 1} of them may wait")
        self.size = self.total - self.spares
        self.stateful, self.checkpoints = stateful, checkpoints
        self.timeout_s, self.collective_timeout_s, self.max_restarts = timeout_s, collective_timeout_s, max_restarts
        self.rank: int | None = None  # this process's rank in the last generation it was active in
        self.memory: bytes | None = None
        self.memory_step = 0
        self.store = None

    # --- state -------------------------------------------------------------------------------
    def _snapshot(self, step: int) -> None:
        import torch

        from .resume import _rng_state
        buffer = io.BytesIO()
        torch.save({"step": step, "states": {name: obj.state_dict() for name, obj in self.stateful.items()},
                    "rng": _rng_state()}, buffer)
        self.memory, self.memory_step = buffer.getvalue(), step

    def _load_memory(self) -> None:
        import torch

        from .resume import _set_rng_state
        saved = torch.load(io.BytesIO(self.memory), map_location="cpu", weights_only=True)
        for name, obj in self.stateful.items():
            obj.load_state_dict(saved["states"][name])
        _set_rng_state(saved["rng"])

    def _disk_step(self) -> int:
        if self.checkpoints is None:
            return 0
        from .resume import _step_of
        latest = self.checkpoints.latest()
        return _step_of(latest) if latest is not None else 0

    def _restore_disk(self) -> None:
        step = self.checkpoints.restore(**self.stateful)
        self._snapshot(step)

    # --- the lighthouse ------------------------------------------------------------------------
    def _connect(self):
        from torch.distributed import TCPStore
        host, _, port = os.environ[LIGHTHOUSE_ENV].rpartition(":")
        self.store = TCPStore(host, int(port), is_master=False, timeout=timedelta(seconds=self.timeout_s))

    def _arrive(self, g: int) -> None:
        """Be counted in generation ``g``, with what this process holds."""
        me = {"p": self.process, "rank": self.rank, "step": self.memory_step, "pid": os.getpid(),
              "node": os.environ.get("SLURMD_NODENAME", socket.gethostname())}
        self.store.set(f"g{g}/p{self.process}", json.dumps(me))
        self.store.add(f"g{g}/count", 1)

    def _meet(self, g: int, expected: int, arrived: bool = False) -> list[dict[str, Any]]:
        """Join generation ``g`` (unless ``arrived``); its members once it closes: at least
        ``size`` arrived and either all ``expected`` did or none came for ``SETTLE_S`` (half of
        ``timeout_s`` at the first start). The first to close it writes the list (compare_set),
        so every process reads the same one."""
        store = self.store
        if not arrived:
            self._arrive(g)
        deadline = time.monotonic() + self.timeout_s
        last, since = -1, time.monotonic()
        while True:
            if store.check([f"g{g}/members"]):
                return json.loads(store.get(f"g{g}/members"))
            count = store.add(f"g{g}/count", 0)
            now = time.monotonic()
            if count != last:
                last, since = count, now
            # The first start waits for every process (a slow one is not a dead one: placed where
            # it was, a spare would stand in for a rank on the node the job spread it to).
            patience = self.timeout_s / 2 if g == 0 else SETTLE_S
            if count >= self.size and (count >= expected or now - since >= patience):
                keys = [f"g{g}/p{q}" for q in range(self.total)]
                arrived = [json.loads(store.get(k)) for k in keys if store.check([k])]
                return json.loads(store.compare_set(f"g{g}/members", "", json.dumps(arrived)))
            if now > deadline:
                raise InJobFailed(f"generation {g}: {count} of the {self.size} processes it needs came within "
                                  f"{self.timeout_s:g} s (the job's spares are used up)")
            time.sleep(POLL_S)

    def _wait_for_call(self, g: int) -> int | None:
        """A spare waits: the generation it is called to, or None once the job's training is done."""
        while True:
            if self.store.check(["generation"]):
                called = int(self.store.get("generation"))
                if called > g:
                    return called
            if self.store.check(["done"]):
                return None
            if self.store.check(["failed"]):
                raise InJobFailed(f"the job's active ranks could not carry on: {self.store.get('failed').decode()}")
            time.sleep(POLL_S)

    def _call(self, g: int) -> None:
        """Call generation ``g`` (the spares wait for it); never back to an older one."""
        seen = ""
        while True:
            now = self.store.compare_set("generation", seen, str(g)).decode()
            if int(now) >= g:
                return
            seen = now

    def _assign(self, g: int, members: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The active members of generation ``g``, by rank: each old rank kept by its holder, a
        lost one taken by a spare on the node it was on where there is one (NVRx's FillGaps, with
        its Tree's preference for a spare in the same domain: a node's share of ranks, and of
        its GPUs, stays as Slurm placed it), else by the spare of the lowest process number."""
        previous = json.loads(self.store.get(f"g{g - 1}/active")) if g and self.store.check([f"g{g - 1}/active"]) else []
        kept: dict[int, dict[str, Any]] = {}
        for m in sorted(members, key=lambda m: m["p"]):
            if m["rank"] is not None and m["rank"] < self.size and m["rank"] not in kept:
                kept[m["rank"]] = m
        free = [m for m in sorted(members, key=lambda m: m["p"]) if m not in kept.values()]
        active = []
        for r in range(self.size):
            if r not in kept:
                node = previous[r] if r < len(previous) else None
                kept[r] = next((m for m in free if m["node"] == node), free[0])
                free.remove(kept[r])
            active.append(kept[r])
        self.store.compare_set(f"g{g}/active", "", json.dumps([m["node"] for m in active]))
        return active

    # --- the loop ------------------------------------------------------------------------------
    def run(self, train: Callable[[World], Any]) -> Any:
        try:
            return self._run(train)
        except InJobFailed as e:
            print(f"in-job restart: process {self.process} cannot carry on ({e}); it exits with status "
                  f"{EXIT_REQUEUE} and the job is requeued", flush=True)
            if self.store is not None:
                self.store.compare_set("failed", "", str(e)[:500])  # the waiting spares end too, the lighthouse requeues
            raise SystemExit(EXIT_REQUEUE) from None

    def _run(self, train: Callable[[World], Any]) -> Any:
        if self.total == 1 or not os.environ.get(LIGHTHOUSE_ENV):
            if self.total > 1:  # each of srun's processes alone would train the whole model on its own
                print(f"in-job restart: process {self.process} of {self.total} runs as a world of one: "
                      f"{LIGHTHOUSE_ENV} is not set (run srun under `python -m jupyter_gtc.lighthouse srun ...`)",
                      flush=True)
            if self.checkpoints is not None:
                self._restore_disk()
            self.rank = 0
            return train(World(0, 1, self.memory_step + 1, 0, self.process, self))
        import torch.distributed as dist

        self._connect()
        if self.checkpoints is not None:
            self._restore_disk()  # every process, spares too: they wait warm
        else:
            self._snapshot(0)  # the state every process built: what a fault before the first snapshot resumes
        g, expected, restarts, arrived = 0, self.total, 0, False
        while True:
            members = self._meet(g, expected, arrived)
            arrived = False
            expected = len(members)
            active = self._assign(g, members)
            ranks = {m["p"]: i for i, m in enumerate(active)}
            if self.process not in ranks:
                self.rank = None
                called = self._wait_for_call(g)
                if called is None:
                    return None
                g = called
                continue
            self.rank = ranks[self.process]
            try:
                dist.init_process_group("gloo", store=dist.PrefixStore(f"pg{g}", self.store), rank=self.rank,
                                        world_size=self.size, timeout=timedelta(seconds=self.collective_timeout_s))
                self._sync(g, active)
                result = train(World(self.rank, self.size, self.memory_step + 1, g, self.process, self))
            except Exception as e:  # noqa: BLE001 - sorted below: only a distributed fault restarts
                if not _is_fault(e):
                    raise
                restarts += 1
                if restarts > self.max_restarts:
                    raise InJobFailed(f"{restarts - 1} restarts inside the job (max_restarts); the last: {e}") from e
                print(f"in-job restart: process {self.process} (rank {self.rank}) saw {type(e).__name__}: "
                      f"{str(e).strip().splitlines()[0][:200] if str(e).strip() else ''}; generation {g + 1} "
                      f"resumes from step {self.memory_step}", flush=True)
                # Counted first, then the spares called: a survivor that holds the newest state is
                # among the first members, never left out by spares that came while it tore down.
                g += 1
                self._arrive(g)
                arrived = True
                self._call(g)
                _abandon()
                continue
            self.store.set("done", str(self.process))
            dist.destroy_process_group()
            return result

    def _sync(self, g: int, active: list[dict[str, Any]]) -> None:
        """Every active rank takes the newest state: the newest in-memory snapshot among them,
        sent from its holder over the new group, or the disk checkpoint where that is newer."""
        import torch
        import torch.distributed as dist

        newest = max(m["step"] for m in active)
        if self.checkpoints is not None and self._disk_step() > newest:
            self._restore_disk()
            return
        source = next(i for i, m in enumerate(active) if m["step"] == newest)
        if all(m["step"] == newest for m in active) and g > 0:
            self._load_memory()  # every rank holds the same snapshot: roll back to it, send nothing
            return
        if g == 0 and all(m["step"] == newest for m in active):
            return  # the first start: every rank built the same state
        size = torch.tensor([len(self.memory) if self.rank == source else 0], dtype=torch.int64)
        dist.broadcast(size, src=source)
        data = (torch.frombuffer(bytearray(self.memory), dtype=torch.uint8) if self.rank == source
                else torch.empty(int(size), dtype=torch.uint8))
        dist.broadcast(data, src=source)
        if self.rank != source:
            self.memory, self.memory_step = data.numpy().tobytes(), newest
        self._load_memory()


def in_job(train: Callable[[World], Any], *, spares: int | None = None, checkpoints: Any = None,
           timeout_s: float = 30.0, **stateful: Any) -> Any:
    """Run ``train(world)`` on the job's active ranks, again in the same processes after a
    fault (see the module's text). Returns what ``train`` returned (None on a spare that was
    never called)."""
    return InJob(spares=spares, checkpoints=checkpoints, timeout_s=timeout_s, **stateful).run(train)


def _is_fault(e: BaseException) -> bool:
    """Whether ``e`` is a peer's fault seen through torch.distributed (a closed connection, a
    timeout, a failed rendezvous), not a bug of the script's own, which would fail again."""
    import torch.distributed as dist

    if isinstance(e, (dist.DistError, ConnectionError, TimeoutError)):
        return True
    said = str(e).lower()
    return isinstance(e, RuntimeError) and any(
        x in said for x in ("gloo", "connection closed", "connection reset", "timed out", "socket", "broken pipe",
                            "nccl"))


def _abandon() -> None:
    """Leave the broken process group (its peers may be dead: nothing is waited on)."""
    import torch.distributed as dist

    try:
        if dist.is_initialized():
            dist.destroy_process_group()
    except Exception:  # noqa: BLE001 - a group whose peers died may fail its own teardown
        pass
