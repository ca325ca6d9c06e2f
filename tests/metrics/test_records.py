"""TFRecord framing: cut records wait, corrupt ones in the middle are skipped."""

from __future__ import annotations

import io
import os
import random

import pytest
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c as tb_masked_crc

from jupyter_gtc.metrics.records import (
    HEADER_SIZE, frame_record, masked_crc32c, parse_records, read_records)

PAYLOADS = [os.urandom(n) for n in (0, 1, 30, 127, 128, 300, 5000)]


def framed(payloads=PAYLOADS) -> tuple[bytes, list[int]]:
    """The file bytes and the offset where each record ends."""
    buf, ends = b"", []
    for p in payloads:
        buf += frame_record(p)
        ends.append(len(buf))
    return buf, ends


def test_masked_crc_matches_tensorboard():
    for data in (b"", b"123456789", os.urandom(1000)):
        assert masked_crc32c(data) == tb_masked_crc(data)


def test_every_cut_returns_the_complete_records_and_resumes_at_the_cut_one():
    buf, ends = framed()
    for cut in range(len(buf) + 1):
        batch = parse_records(buf[:cut])
        complete = [e for e in ends if e <= cut]
        assert batch.records == PAYLOADS[:len(complete)]
        assert batch.next_offset == (complete[-1] if complete else 0)
        assert batch.corrupt == 0


def test_reading_a_growing_file_in_random_pieces_yields_each_record_once():
    buf, _ = framed(PAYLOADS * 20)
    rng = random.Random(4)
    f = io.BytesIO()
    got, offset, tail = [], 0, b""
    while f.tell() < len(buf):
        f.seek(0, io.SEEK_END)
        f.write(buf[f.tell():f.tell() + rng.randint(1, 700)])
        batch = read_records(f, offset, tail, chunk_size=rng.choice([16, 64, 4096]))
        got += batch.records
        offset, tail = batch.next_offset, batch.tail
        assert tail == buf[max(0, offset - 16):offset]
    assert got == PAYLOADS * 20


def test_a_record_larger_than_a_chunk_is_read_whole():
    big = os.urandom(100_000)
    batch = read_records(io.BytesIO(frame_record(b"x") + frame_record(big)), 0, chunk_size=64)
    assert batch.records == [b"x", big]


def corrupt(buf: bytes, at: int) -> bytes:
    return buf[:at] + bytes([buf[at] ^ 0xFF]) + buf[at + 1:]


def test_bad_data_checksum_in_the_middle_is_skipped_and_counted(caplog):
    buf, ends = framed()
    bad = corrupt(buf, ends[3] + HEADER_SIZE + 5)   # inside record 4's data
    batch = parse_records(bad)
    assert batch.records == PAYLOADS[:4] + PAYLOADS[5:]
    assert batch.corrupt == 1 and batch.next_offset == len(buf)
    assert "checksum" in caplog.text


def test_bad_header_in_the_middle_is_skipped_by_finding_the_next_record():
    buf, ends = framed()
    bad = corrupt(buf, ends[3] + 2)                  # inside record 4's length
    batch = parse_records(bad)
    assert batch.records == PAYLOADS[:4] + PAYLOADS[5:]
    assert batch.corrupt == 1


@pytest.mark.parametrize("where", ["data", "header", "footer"])
def test_a_bad_last_record_waits_then_is_skipped_once_the_file_goes_on(where):
    buf, ends = framed()
    start = ends[-2]
    at = {"data": start + HEADER_SIZE + 1, "header": start + 1, "footer": len(buf) - 1}[where]
    bad = corrupt(buf, at)
    batch = parse_records(bad)
    # Not consumed and not counted: it may be a write not yet visible.
    assert batch.records == PAYLOADS[:-1] and batch.next_offset == start
    assert batch.corrupt == 0
    grown = parse_records(bad[start:] + frame_record(b"after"), start)
    assert grown.records == [b"after"] and grown.corrupt == 1


def test_zeros_past_the_end_are_not_consumed():
    # NFS can show a grown size with the bytes still zero.
    buf, ends = framed()
    batch = parse_records(buf + bytes(64))
    assert batch.records == PAYLOADS and batch.next_offset == len(buf) and batch.corrupt == 0
