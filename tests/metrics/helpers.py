"""Event files for the metrics tests, made by the real writers where they exist."""

from __future__ import annotations

import struct
from pathlib import Path

from tensorboard.compat.proto import event_pb2, summary_pb2

from jupyter_gtc.metrics.records import frame_record


def write_torch(log_dir: Path, points: list[tuple[str, int, float]], **add_scalar_kw) -> Path:
    """Write (tag, step, value) points with torch.utils.tensorboard; return the file."""
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(log_dir))
    for tag, step, value in points:
        writer.add_scalar(tag, value, step, **add_scalar_kw)
    writer.close()
    return event_file(log_dir)


def event_file(folder: Path) -> Path:
    """The one event file directly in `folder`."""
    (path,) = [p for p in Path(folder).iterdir() if "tfevents" in p.name]
    return path


def points(n: int, tags=("loss", "acc")) -> list[tuple[str, int, float]]:
    """n points per tag, values exact in float32 so comparisons can be exact."""
    return [(tag, step, step * 0.5 + i) for step in range(n) for i, tag in enumerate(tags)]


def as_points(scalars) -> list[tuple[str, int, float]]:
    return [(s.tag, s.step, s.value) for s in scalars]


def tf2_event(tag: str, step: int, value: float, *, metadata: bool, double: bool = False,
              content: bool = True, wall_time: float = 1.7e9) -> event_pb2.Event:
    """An Event as TF2's tf.summary.scalar writes it: a scalar tensor, metadata on the
    first value of a tag only (TensorFlow itself is too big to install for tests)."""
    event = event_pb2.Event(wall_time=wall_time, step=step)
    v = event.summary.value.add(tag=tag)
    v.tensor.dtype = 2 if double else 1
    v.tensor.tensor_shape.SetInParent()  # shape [] : a scalar
    fmt = "<d" if double else "<f"
    if content:
        v.tensor.tensor_content = struct.pack(fmt, value)
    elif double:
        v.tensor.double_val.append(value)
    else:
        v.tensor.float_val.append(value)
    if metadata:
        v.metadata.plugin_data.plugin_name = "scalars"
        v.metadata.data_class = summary_pb2.DATA_CLASS_SCALAR
    return event


def file_bytes(events) -> bytes:
    """Framed records of `events` (Event protos), as a writer would put them in a file."""
    head = event_pb2.Event(wall_time=1.7e9, file_version="brain.Event:2")
    return b"".join(frame_record(e.SerializeToString()) for e in [head, *events])


def reference_scalars(records: list[bytes], run: str = "") -> list[tuple]:
    """(tag, step, wall_time, value) per scalar, decoded with TensorBoard's protobuf
    classes under the rules of jupyter_gtc.metrics.events: the oracle for our decoder."""
    is_scalar: dict[str, bool] = {}
    out = []
    for record in records:
        event = event_pb2.Event.FromString(record)
        for v in event.summary.value:
            kind = v.WhichOneof("value")
            if kind == "simple_value":
                out.append((v.tag, event.step, event.wall_time, v.simple_value))
            elif kind == "tensor":
                if v.tag not in is_scalar:
                    if not v.HasField("metadata"):
                        continue
                    is_scalar[v.tag] = (v.metadata.plugin_data.plugin_name == "scalars"
                                        or v.metadata.data_class == summary_pb2.DATA_CLASS_SCALAR)
                value = _one_value(v.tensor) if is_scalar[v.tag] else None
                if value is not None:
                    out.append((v.tag, event.step, event.wall_time, value))
    return out


def _one_value(t) -> float | None:
    elements = 1
    for dim in t.tensor_shape.dim:
        elements *= dim.size
    fmt, size, listed = {1: ("<f", 4, t.float_val), 2: ("<d", 8, t.double_val)}.get(
        t.dtype, (None, 0, []))
    if fmt is None or elements != 1:
        return None
    if len(t.tensor_content) == size:
        return struct.unpack(fmt, t.tensor_content)[0]
    return listed[0] if len(listed) == 1 and not t.tensor_content else None


def write_event_file(path: Path, events) -> int:
    """Write `events` (Event protos, any iterable) as an event file, streaming, after the
    file_version record every writer starts with; returns the file's size."""
    path.parent.mkdir(parents=True, exist_ok=True)
    head = event_pb2.Event(wall_time=1.7e9, file_version="brain.Event:2")
    with open(path, "wb") as f:
        f.write(frame_record(head.SerializeToString()))
        batch = []
        for event in events:
            batch.append(frame_record(event.SerializeToString()))
            if len(batch) >= 10_000:
                f.write(b"".join(batch))
                batch.clear()
        f.write(b"".join(batch))
    return path.stat().st_size


def scalar_events(tags, steps: int, values_per_event: int = 1, wall_time: float = 1.7e9):
    """Events as torch's add_scalar writes them (a simple_value each, one event a value), or
    with `values_per_event` > 1 as TF1's merge_all does (one event, every tag of a step).
    Step s of the i-th tag has the value ``s * 0.25 + i`` (exact in float32)."""
    for step in range(steps):
        event = None
        for i, tag in enumerate(tags):
            if event is None:
                event = event_pb2.Event(wall_time=wall_time + step * 1e-3, step=step)
            event.summary.value.add(tag=tag, simple_value=step * 0.25 + i)
            if len(event.summary.value) == values_per_event:
                yield event
                event = None
        if event is not None:
            yield event


class InOrder:
    """Checks, in constant memory, that each (run, tag) gets steps 0, 1, 2, ... once each
    with the values of `scalar_events`, however the scalars are split into pages."""

    def __init__(self, tags_of_run: dict[str, tuple[str, ...]]):
        self.index = {(run, tag): i for run, tags in tags_of_run.items() for i, tag in enumerate(tags)}
        self.next_step = dict.fromkeys(self.index, 0)
        self.bad: list = []  # the first few scalars out of place

    def take(self, scalars) -> None:
        for s in scalars:
            key = (s.run, s.tag)
            want = self.next_step.get(key)
            if want is None or s.step != want or s.value != s.step * 0.25 + self.index[key]:
                if len(self.bad) < 5:
                    self.bad.append((s, want))
                continue
            self.next_step[key] = want + 1
