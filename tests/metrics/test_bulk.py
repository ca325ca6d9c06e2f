"""The bulk decoder (jupyter_gtc/metrics/bulk.py) on the same files as TensorBoard's own
loader and as the record-at-a-time path it replaced: real writers, odd records, records
torn by a writer mid-flush and records with bad checksums."""

from __future__ import annotations

import math
import random
import struct

import numpy as np
import pytest
from tensorboard.compat.proto import event_pb2, summary_pb2

from jupyter_gtc.metrics import MetricsReader
from jupyter_gtc.metrics.records import frame_record, parse_records

from .helpers import event_file, file_bytes, tf2_event, write_event_file, write_torch

UNICODE_TAGS = ("loss", "lr", "λ/损失", "grad norm 🚀", "a" * 100)
STEPS = 600  # crosses a varint boundary (step 128) in every run


def read(log_dir, bulk: bool, limit: int | None = None):
    """(scalars as comparable tuples, the reader) read by the bulk or the old path."""
    reader = MetricsReader(log_dir)
    reader.bulk = bulk
    got = []
    if limit is None:
        got = reader.read_new(limit=None)
    else:
        for page in reader.pages(limit=limit):
            got.extend(page)
    return [key(s.run, s.tag, s.step, s.wall_time, s.value) for s in got], reader


def key(run, tag, step, wall_time, value) -> tuple:
    """A scalar as a tuple that compares NaNs equal and tells -0.0 from 0.0: the bits."""
    return (run, tag, step, struct.pack("<d", wall_time), struct.pack("<d", value))


def tensorboard_loader(log_dir) -> list[tuple]:
    """The scalars of `log_dir` as read by TensorBoard's own loader (its TFRecord reader,
    CRC checks and Event parser: `event_file_loader.EventFileLoader`), under our rules for
    which values are scalars: `simple_value`s, and one-element float or double tensors of
    tags whose first metadata says "scalars" (TensorBoard's scalars plugin also plots int
    tensors; we do not). Files in name order within a run, as the reader reads them."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    out = []
    for path in sorted(log_dir.rglob("*tfevents*")):
        run = "" if path.parent == log_dir else str(path.parent.relative_to(log_dir))
        is_scalar: dict[str, bool] = {}
        for event in EventFileLoader(str(path)).Load():
            for v in event.summary.value:
                kind = v.WhichOneof("value")
                value = None
                if kind == "simple_value":
                    value = v.simple_value
                elif kind == "tensor":
                    if v.tag not in is_scalar and v.HasField("metadata"):
                        is_scalar[v.tag] = (v.metadata.plugin_data.plugin_name == "scalars"
                                            or v.metadata.data_class == summary_pb2.DATA_CLASS_SCALAR)
                    if is_scalar.get(v.tag):
                        value = _one_float(v.tensor)
                if value is not None:
                    out.append(key(run, v.tag, event.step, event.wall_time, value))
    return out


def _one_float(t) -> float | None:
    elements = math.prod(d.size for d in t.tensor_shape.dim)
    fmt, size, listed = {1: ("<f", 4, t.float_val), 2: ("<d", 8, t.double_val)}.get(t.dtype, (None, 0, []))
    if fmt is None or elements != 1:
        return None
    if len(t.tensor_content) == size:
        return struct.unpack(fmt, t.tensor_content)[0]
    return listed[0] if len(listed) == 1 and not t.tensor_content else None


def odd_events():
    """Events a scalar reader rarely sees, between ordinary ones."""
    steps = [0, 1, 127, 128, 16383, 16384, 2**31, 2**62, 2**63 - 1, -1, -(2**63)]
    walls = [0.0, -1.5, 1e300, float("inf"), float("nan"), 5e-324, 1.7e9]
    for i, step in enumerate(steps):
        e = event_pb2.Event(wall_time=walls[i % len(walls)], step=step)
        e.summary.value.add(tag="edge", simple_value=[0.0, -0.0, float("nan"), float("-inf"), 3.5e38][i % 5])
        yield e
    int_tensor = event_pb2.Event(wall_time=1.7e9, step=3)   # DT_INT32 with scalars metadata
    v = int_tensor.summary.value.add(tag="int_scalar")
    v.tensor.dtype = 3
    v.tensor.tensor_shape.SetInParent()
    v.tensor.int_val.append(7)
    v.metadata.plugin_data.plugin_name = "scalars"
    yield int_tensor
    pair = event_pb2.Event(wall_time=1.7e9, step=4)         # two floats: no scalar
    v = pair.summary.value.add(tag="pair")
    v.tensor.dtype = 1
    v.tensor.tensor_shape.dim.add(size=2)
    v.tensor.float_val.extend([1.0, 2.0])
    v.metadata.plugin_data.plugin_name = "scalars"
    yield pair
    half = event_pb2.Event(wall_time=1.7e9, step=5)         # DT_HALF, one element
    v = half.summary.value.add(tag="half", metadata=summary_pb2.SummaryMetadata(data_class=1))
    v.tensor.dtype = 19
    v.tensor.tensor_shape.SetInParent()
    v.tensor.half_val.append(15360)
    yield half
    merged = event_pb2.Event(wall_time=1.7e9, step=6)       # TF1 merge_all: values together
    for tag in UNICODE_TAGS:
        merged.summary.value.add(tag=tag, simple_value=6.5)
    yield merged
    image = event_pb2.Event(wall_time=1.7e9, step=7)
    image.summary.value.add(tag="img").image.encoded_image_string = bytes(range(256)) * 8
    yield image
    yield event_pb2.Event(wall_time=1.7e9, step=8, file_version="brain.Event:2")
    for step in range(9, STEPS):                             # ordinary again, with NaN losses
        for i, tag in enumerate(UNICODE_TAGS):
            e = event_pb2.Event(wall_time=1.7e9 + step, step=step)
            e.summary.value.add(tag=tag, simple_value=float("nan") if step % 97 == 0 else step + i / 4)
            yield e


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory):
    """Runs from every writer we know, long enough for the bulk path's cycles, and odd."""
    from torch.utils.tensorboard import SummaryWriter

    root = tmp_path_factory.mktemp("writers")
    pts = [(tag, step, step * 0.5 + i) for step in range(STEPS) for i, tag in enumerate(UNICODE_TAGS)]
    write_torch(root, pts)                                                  # simple_value
    write_torch(root / "new_style", pts, new_style=True)                    # float_val, metadata each
    write_torch(root / "double", pts, new_style=True, double_precision=True)
    tf2 = [tf2_event(tag, step, value, metadata=step == 0, double=tag == "lr", content=step % 3 != 1,
                     wall_time=1.7e9 + step) for tag, step, value in pts]
    (root / "tf2").mkdir()
    (root / "tf2" / "events.out.tfevents.1.host").write_bytes(file_bytes(tf2))
    w = SummaryWriter(str(root / "mixed"))                                  # non-scalar summaries
    for step in range(0, STEPS, 50):
        w.add_histogram("weights", np.arange(10.0) * step, step)
        w.add_image("sample", np.zeros((3, 8, 8)), step)
        w.add_text("note", f"step {step} ✓", step)
        for i, tag in enumerate(UNICODE_TAGS):
            w.add_scalar(tag, step + i, step)
    w.close()
    write_event_file(root / "odd" / "events.out.tfevents.1.host", odd_events())
    return root


def test_both_paths_read_what_tensorboards_loader_reads(log_dir):
    expected = tensorboard_loader(log_dir)
    assert len(expected) > 4 * len(UNICODE_TAGS) * STEPS
    for bulk in (True, False):
        got, reader = read(log_dir, bulk)
        assert sorted(got) == sorted(expected), f"bulk={bulk}"
        assert reader.corrupt_records == 0 and reader.undecodable_events == 0


def test_the_common_layouts_are_decoded_in_bulk(log_dir):
    """Every writer's ordinary scalar events go the bulk way; only the odd ones (file
    versions, a tensor tag's first value with its metadata, step 0, which proto3 leaves
    out, images, merged values, negative steps) are decoded one at a time."""
    _, reader = read(log_dir, True)
    total = len(tensorboard_loader(log_dir))
    assert reader.last_poll.events_one_by_one < 100 < total
    _, old = read(log_dir, False)
    assert old.last_poll.events_one_by_one > total - 100   # the old path: every record


@pytest.mark.parametrize("limit", [97, 1000, 4999])
def test_pages_of_any_size_give_each_scalar_once_in_the_same_order_on_both_paths(log_dir, limit):
    whole, _ = read(log_dir, True)
    for bulk in (True, False):
        got, _ = read(log_dir, bulk, limit=limit)
        assert sorted(got) == sorted(whole), f"bulk={bulk}"


def test_a_cycle_of_tags_of_one_size_is_read_as_tensorboard_reads_it_however_it_breaks(tmp_path):
    """Ten tags of one length make records of one size, yet a cycle of ten records (the bulk
    path's common case: it compares whole cycles byte for byte but for the numbers); a tag of
    the same length now and then breaks the cycle, and steps cross 16384, where their varint
    grows a byte. Every scalar comes once, as TensorBoard's own loader reads it, in pages of
    any size, on both paths."""
    tags = [f"train/metric_{i}" for i in range(10)]
    pts = []
    for step in [*range(16000, 16700)]:
        pts += [(tag, step, step * 0.25 + i) for i, tag in enumerate(tags)]
        if step % 37 == 0:
            pts.append(("train/metric_x", step, -1.0))
    write_torch(tmp_path, pts)
    expected = tensorboard_loader(tmp_path)
    assert len(expected) == len(pts)
    for bulk in (True, False):
        for limit in (None, 7, 1000):
            got, _ = read(tmp_path, bulk, limit)
            assert sorted(got) == sorted(expected), (bulk, limit)


def one_file(log_dir):
    return event_file(log_dir)  # the torch simple_value run: the bulk path's common case


def test_a_record_torn_by_a_writer_is_read_once_it_is_whole(log_dir, tmp_path):
    data = one_file(log_dir).read_bytes()
    records = parse_records(data).records
    starts = np.cumsum([0] + [len(r) + 16 for r in records])
    data = data[:int(starts[1200])]   # enough for the bulk path's cycles, quick to read 300 times
    rng = random.Random(29)
    # Every byte of the last record, and cuts anywhere in the file.
    cuts = list(range(int(starts[1199]), len(data))) + rng.sample(range(1, len(data)), 30)
    (tmp_path / "whole").mkdir()
    (tmp_path / "whole" / "events.out.tfevents.1.h").write_bytes(data)
    whole, _ = read(tmp_path / "whole", True)
    for cut in cuts:
        path = tmp_path / "torn" / "events.out.tfevents.1.h"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(data[:cut])
        readers = {}
        for bulk in (True, False):
            readers[bulk] = MetricsReader(path.parent)
            readers[bulk].bulk = bulk
        firsts = {bulk: r.read_new(limit=None) for bulk, r in readers.items()}
        assert firsts[True] == firsts[False], cut
        with open(path, "ab") as f:
            f.write(data[cut:])
        for bulk, r in readers.items():
            got = firsts[bulk] + r.read_new(limit=None)
            assert [key(s.run, s.tag, s.step, s.wall_time, s.value) for s in got] == whole, (cut, bulk)
            assert r.corrupt_records == 0


def corrupt(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x40]) + data[at + 1:]


@pytest.mark.parametrize("where", ["data", "data CRC", "length", "length CRC"])
def test_a_corrupt_record_amid_thousands_alike_is_skipped_and_counted_by_both_paths(log_dir, tmp_path, where):
    """In a long stretch of same-sized records (where the bulk path checks boundaries and
    CRCs many records at a time) one bad byte loses that record only, on both paths."""
    data = one_file(log_dir).read_bytes()
    records = parse_records(data).records
    starts = np.cumsum([0] + [len(r) + 16 for r in records])
    victim = len(records) // 2
    offset = {"data": 12 + 20, "data CRC": 12 + len(records[victim]), "length": 0, "length CRC": 9}[where]
    path = tmp_path / "bad" / "events.out.tfevents.1.h"
    path.parent.mkdir()
    path.write_bytes(corrupt(data, int(starts[victim]) + offset))
    (tmp_path / "whole").mkdir()
    (tmp_path / "whole" / path.name).write_bytes(data)
    whole, _ = read(tmp_path / "whole", True)
    lost = whole[victim - 1]  # the file_version record holds no scalar: record i is scalar i - 1
    for bulk in (True, False):
        got, reader = read(path.parent, bulk)
        assert got == whole[:victim - 1] + whole[victim:], (where, bulk)
        assert lost not in got and reader.corrupt_records == 1


def test_a_corrupt_last_record_waits_then_is_skipped_once_the_file_goes_on(log_dir, tmp_path):
    data = one_file(log_dir).read_bytes()
    path = tmp_path / "events.out.tfevents.1.h"
    tail = frame_record(event_pb2.Event(wall_time=2e9, step=10**6,
                                        summary=summary_pb2.Summary(value=[
                                            summary_pb2.Summary.Value(tag="late", simple_value=1.0)])).SerializeToString())
    for bulk in (True, False):
        path.write_bytes(corrupt(data, len(data) - 6))   # the last record's data
        reader = MetricsReader(tmp_path)
        reader.bulk = bulk
        first = reader.read_new(limit=None)
        assert len(first) == len(parse_records(data).records) - 2 and reader.corrupt_records == 0
        with open(path, "ab") as f:
            f.write(tail)
        second = reader.read_new(limit=None)
        assert [(s.tag, s.step) for s in second] == [("late", 10**6)] and reader.corrupt_records == 1
