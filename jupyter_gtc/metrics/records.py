"""TFRecord framing, read incrementally from a byte offset.

A TensorBoard event file is a sequence of records::

    uint64 length          (little endian)
    uint32 masked_crc32c(length bytes)
    byte   data[length]
    uint32 masked_crc32c(data)

Writers append and flush whenever they like, so a reader polling the file can see a
record cut in half. Such a tail is never consumed: `read_records` returns the complete
records and the offset of the first incomplete one, and the next call resumes there.

A record whose checksum fails is skipped (logged and counted) only when the file goes on
past it with a valid record. A bad record at the very end may be a write that is not
fully visible yet (NFS can show a grown size before the bytes), so it is treated like a
cut record and looked at again on the next poll.

CRC32C comes from `google-crc32c` (Google's C library, the one google-cloud-storage
uses): about 10M small records/s here, where TensorBoard's pure-Python fallback manages
a few hundred thousand bytes/s.
"""

from __future__ import annotations

import logging
import struct
import sys
from dataclasses import dataclass, field
from typing import BinaryIO

import google_crc32c

log = logging.getLogger(__name__)

if google_crc32c.implementation != "c":  # pragma: no cover - depends on the wheel
    log.warning("google-crc32c has no C extension here; reading event files will be slow")

_crc32c = google_crc32c.value
_HEADER = struct.Struct("<QI")  # length, masked crc of the length
_U32 = struct.Struct("<I")
HEADER_SIZE = _HEADER.size      # 12
FOOTER_SIZE = 4
CHUNK_SIZE = 256 << 10          # read big files in pieces so memory stays bounded
TAIL_SIZE = 16                  # bytes kept to recognise a file replaced under a reader
_LENGTH_CRCS: dict[int, int] = {}  # record length -> masked CRC of its 8 bytes


def masked_crc32c(data: bytes) -> int:
    """TFRecord's masked CRC32C (rotate right 15, add a constant), as every writer stores it."""
    crc = _crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frame_record(data: bytes) -> bytes:
    """One record's bytes as they sit in a file. Tests and benchmarks use it."""
    length = struct.pack("<Q", len(data))
    return length + _U32.pack(masked_crc32c(length)) + data + _U32.pack(masked_crc32c(data))


@dataclass
class RecordBatch:
    """What one read returned: complete records, where to resume, what was skipped."""

    records: list[bytes] = field(default_factory=list)
    next_offset: int = 0     # offset of the first record not consumed (incomplete or unread)
    corrupt: int = 0         # records (or unreadable stretches) skipped for a bad checksum
    bytes_read: int = 0
    tail: bytes = b""        # the TAIL_SIZE bytes before next_offset (see read_records)
    at_end: bool = True      # read to the end of the file, not stopped by a limit


def _header_ok(buf: bytes, pos: int) -> int | None:
    """The record length at `pos` if its header checksum holds, else None."""
    length, crc = _HEADER.unpack_from(buf, pos)
    if masked_crc32c(buf[pos:pos + 8]) != crc:
        return None
    return length


def _record_ok(buf: bytes, pos: int) -> bool:
    """True if a whole, valid record starts at `pos` in `buf`."""
    if len(buf) - pos < HEADER_SIZE:
        return False
    length = _header_ok(buf, pos)
    if length is None:
        return False
    end = pos + HEADER_SIZE + length
    if end + FOOTER_SIZE > len(buf):
        return False
    return masked_crc32c(buf[pos + HEADER_SIZE:end]) == _U32.unpack_from(buf, end)[0]


def _resync(buf: bytes, pos: int) -> int | None:
    """After a bad header: the next position where a whole valid record starts, if any.

    A header checksum over 8 bytes is a strong marker (a false match is 1 in 2**32 per
    position, and the data checksum must hold as well). Scanning is slow but rare.
    """
    for candidate in range(pos + 1, len(buf) - HEADER_SIZE - FOOTER_SIZE + 1):
        if _record_ok(buf, candidate):
            return candidate
    return None


def parse_records(buf: bytes, base_offset: int = 0, max_records: int | None = None) -> RecordBatch:
    """Split `buf` (file bytes starting at `base_offset`) into records.

    Stops at the first record that is not wholly in `buf`, or after `max_records` records;
    `next_offset` points at the first record not returned.
    """
    out = RecordBatch(next_offset=base_offset, bytes_read=len(buf))
    records = out.records
    append = records.append
    limit = sys.maxsize if max_records is None else max_records
    unpack_header = _HEADER.unpack_from
    unpack_u32 = _U32.unpack_from
    crc32c = _crc32c
    length_crcs = _LENGTH_CRCS
    size = len(buf)
    pos = 0
    while size - pos >= HEADER_SIZE and len(records) < limit:
        length, header_crc = unpack_header(buf, pos)
        # Scalar events come in a few lengths, so the header checksum is a dict hit.
        expected = length_crcs.get(length)
        if expected is None:
            expected = masked_crc32c(buf[pos:pos + 8])
            if len(length_crcs) < 65536:
                length_crcs[length] = expected
        if expected != header_crc:
            # The length cannot be trusted: find the next good record, if the file has one.
            nxt = _resync(buf, pos)
            if nxt is None:
                break  # maybe a write not yet visible; look again next poll
            log.warning("skipping %d unreadable bytes at offset %d (bad record header)",
                        nxt - pos, base_offset + pos)
            out.corrupt += 1
            pos = nxt
            continue
        start = pos + HEADER_SIZE
        end = start + length
        if end + FOOTER_SIZE > size:
            break  # cut in half by a writer mid-flush
        data = buf[start:end]
        crc = crc32c(data)  # masked_crc32c, inlined: this loop runs once per scalar
        if (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF != unpack_u32(buf, end)[0]:
            if not _record_ok(buf, end + FOOTER_SIZE):
                break  # last record in view: maybe not fully visible yet
            log.warning("skipping record at offset %d: data checksum mismatch", base_offset + pos)
            out.corrupt += 1
        else:
            append(data)
        pos = end + FOOTER_SIZE
    out.next_offset = base_offset + pos
    return out


def read_records(f: BinaryIO, offset: int, tail: bytes = b"", chunk_size: int = CHUNK_SIZE, *,
                 max_records: int | None = None, max_bytes: int | None = None) -> RecordBatch:
    """Read the complete records from `offset` to the end of the open file `f`, or fewer.

    `tail` is the `tail` of the batch that ended at `offset` (empty at 0); the new batch's
    `tail` lets the caller check, next time, that the bytes before its offset are still
    the ones it read. The file is read in chunks of `chunk_size` bytes; a record that
    spans a chunk boundary is carried into the next chunk, and a record larger than a
    chunk makes the next read big enough to hold it.

    With `max_records` the batch holds at most that many records, and with `max_bytes`
    reading stops at the first chunk that takes it to that many bytes of records; then
    `at_end` is False and `next_offset` is where the next read goes on. So what a read
    holds in memory is bounded whatever the size of the file.
    """
    records: list = []
    limit = sys.maxsize if max_records is None else max_records

    def consume(buf: bytes, base: int) -> tuple[int, int, bool]:
        batch = parse_records(buf, base, limit - len(records))
        records.extend(batch.records)
        return batch.next_offset - base, batch.corrupt, False

    total = read_framed(f, offset, tail, consume, lambda: len(records) < limit, chunk_size=chunk_size,
                        max_bytes=max_bytes)
    total.records = records
    return total


def read_framed(f: BinaryIO, offset: int, tail: bytes, consume, more, *, chunk_size: int = CHUNK_SIZE,
                max_bytes: int | None = None) -> RecordBatch:
    """The chunked read under `read_records` and the bulk decoder's `read_scalars`: from `offset`,
    a chunk at a time (a record spanning two carried into the next; one larger than a chunk
    makes the next read big enough), each chunk's bytes given to `consume(buf, base)` (`base`:
    their offset in the file), which answers (bytes it consumed: whole records, records skipped
    as corrupt, whether it stopped early). Reading stops where `more()` says no, where `max_bytes`
    of records were read or where `consume` stopped: then `at_end` is False and `next_offset`
    is where the next read goes on. The batch's `records` stay for the caller to fill."""
    total = RecordBatch(next_offset=offset, tail=tail)
    bytes_limit = sys.maxsize if max_bytes is None else max_bytes
    f.seek(offset)
    pending = b""
    while True:
        if not more() or total.next_offset - offset >= bytes_limit:
            total.at_end = False
            break
        chunk = f.read(max(chunk_size, bytes_needed(pending)))
        total.bytes_read += len(chunk)
        if not chunk:
            break
        buf = pending + chunk if pending else chunk
        consumed, corrupt, stopped = consume(buf, total.next_offset)
        total.corrupt += corrupt
        total.tail = (total.tail + buf[max(0, consumed - TAIL_SIZE):consumed])[-TAIL_SIZE:]
        pending = buf[consumed:]
        total.next_offset += consumed
        if stopped:
            total.at_end = False
            break
    return total


def bytes_needed(pending: bytes) -> int:
    """How many more bytes the record at the start of `pending` needs, if its header says."""
    if len(pending) < HEADER_SIZE:
        return 0
    length = _header_ok(pending, 0)
    if length is None:
        return 0  # a bad header says nothing about the size; read the usual chunk
    return HEADER_SIZE + length + FOOTER_SIZE - len(pending)
