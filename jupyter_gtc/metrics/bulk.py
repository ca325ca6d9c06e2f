"""Event records checked and decoded a chunk at a time with numpy: the common case in bulk.

`records.parse_records` and `events.EventDecoder` handle any record, one at a time in
Python; profiled on 1M torch `add_scalar` events they cost ~2.5 us a scalar, 80% of it
per-record work (framing, a CRC call, the wire-format walk, the Scalar). Here one chunk of a
file (`CHUNK_SIZE`, a few thousand records) is done in a handful of numpy operations:

* framing: one tight Python loop over the length fields finds the record boundaries (the
  only per-record Python step: each length says where the next record starts);
* header checksums: compared in bulk against the masked CRC of each distinct length;
* data checksums, batch-verified: CRC32C is affine over GF(2) for a fixed length, so
  for the records of one length XOR of their CRCs must equal a single CRC of the XOR of
  their bytes (adjusted by the CRC of zeros when there are an even number). One CRC call
  and one XOR-reduce check them all. A single bad record is caught exactly as a CRC of its
  own would catch it; bad records can only slip through together, if their errors cancel
  (chance 2**-32). Any mismatch sends the chunk to the record-at-a-time path, which finds
  the bad record, skips or waits for it as before;
* cycles: a writer of scalars writes the same tags in the same order every step, so its
  records repeat a cycle, byte for byte but for each one's wall time, step, value and
  checksum. Where two cycles of at most MAX_CYCLE records do (`_decode_cycles`), every
  cycle of the stretch is compared with the first in one operation, each tag is read once
  per position in the cycle, and the numbers are read from computed positions: no record
  is looked at on its own. A record that breaks the cycle (a tag written now and then, a
  step whose varint grew) ends the stretch; a new one is looked for just past it;
* decoding the rest: Events laid out as the writers of scalars lay them out (wall_time, step, one
  summary value: a tag and a `simple_value`, or a scalar float/double tensor of a tag
  already known as a scalar) are recognised by comparing bytes at computed positions of
  every record at once; anything else (the file_version event, images, step 0 (omitted by
  proto3), a tag's first tensor with its metadata, several values in one event...) is
  decoded by `EventDecoder`, in file order.

bench/metrics_tail.py prints this path, the record-at-a-time one (`MetricsReader.bulk =
False`) and TensorBoard's Rust data server side by side on 1M torch scalars: ~3.9x the old
path's scalars per CPU-second, ~1.5x the Rust server's. What is left per scalar is mostly
building the `Scalar` (a named tuple, made in C: see `scalar.scalars`) and Python's GC
seeing it once.

Why this and not the other ways: a per-record CRC call (`google-crc32c`, C) plus the slice
it needs cost 0.24 us a record by themselves (measured), a quarter of the budget of 1M
scalars a CPU-second; TensorBoard's Rust data server is a separate process that reads whole
directories and answers over gRPC, so it cannot resume at an offset, read through a Host
(SSH, Cloud Storage) or bound a poll's memory, and its answer must still become Scalars.
"""

from __future__ import annotations

import struct

import numpy as np

from .events import EventDecoder
from .records import CHUNK_SIZE, FOOTER_SIZE, HEADER_SIZE, RecordBatch, masked_crc32c, parse_records, read_framed
from .scalar import Scalar, scalars

MAX_BUFFER = 8 << 20      # bigger buffers (a record bigger than a chunk) go record at a time
SMALL_RECORD = 512        # records up to this many bytes are decoded in bulk
WALK = 48                 # records walked one by one before looking for a cycle
MAX_ROUNDS = 16           # decode calls per chunk before the rest goes one record at a time
SLACK = 64                # records decoded past a page's room, for those that hold no scalar
MAX_CYCLE = 24            # the longest cycle of record sizes (and of records) looked for
FEW = 32                  # records decoded one at a time rather than in bulk, when no more are left
MAX_SINGLES = 4           # records taken one at a time after a cycle broke, looking for the next
_PAD = 1024               # zeros after a buffer, so positions computed from garbage stay inside
_U64 = struct.Struct("<Q")
_LENGTH_CRCS: dict[int, int] = {}   # record length -> masked CRC of its 8 bytes
_ZERO_CRCS: dict[int, int] = {}     # length -> CRC32C of that many zero bytes
_MASK_DELTA = 0xA282EAD8
_PRIME = np.uint64(0x100000001B3)  # FNV-1's 64-bit prime: an odd multiplier mixes well enough here


def _length_crc(length: int) -> int:
    crc = _LENGTH_CRCS.get(length)
    if crc is None:
        crc = masked_crc32c(_U64.pack(length))
        if len(_LENGTH_CRCS) < 65536:
            _LENGTH_CRCS[length] = crc
    return crc


def _zero_crc(length: int) -> int:
    crc = _ZERO_CRCS.get(length)
    if crc is None:
        import google_crc32c

        crc = _ZERO_CRCS[length] = google_crc32c.value(bytes(length))
    return crc


def _gather(a: np.ndarray, pos: np.ndarray, width: int, dtype: str) -> np.ndarray:
    """The little-endian `dtype` of `width` bytes at each position of `pos` in `a` (rows of
    a sliding window: no index matrix, whose int64s would outweigh the chunk)."""
    return np.lib.stride_tricks.sliding_window_view(a, width)[pos].view(dtype)[:, 0]


def _unmask(masked: np.ndarray) -> np.ndarray:
    """TFRecord's masked CRCs back to CRC32C: subtract the constant, rotate left 15."""
    x = (masked.astype(np.uint64) - _MASK_DELTA) & 0xFFFFFFFF
    return ((x << 15) | (x >> 17)) & 0xFFFFFFFF


class Frames:
    """The complete records at the start of a buffer, all checksums verified."""

    __slots__ = ("starts", "lengths", "end")

    def __init__(self, starts: np.ndarray, lengths: np.ndarray, end: int):
        self.starts = starts      # where each record's header starts
        self.lengths = lengths    # each record's data length
        self.end = end            # the first byte after the last complete record


def scan(buf: bytes, a: np.ndarray) -> Frames | None:
    """The records of `buf` (`a`: its bytes padded with zeros) if every one of them, and the
    header of a record cut at the end, checks out; None when anything does not (a bad
    checksum, a header that is garbage): the record-at-a-time path then reads `buf`."""
    starts, pos = _boundaries(buf, a)
    if pos <= len(buf) - HEADER_SIZE:
        # A record cut by the end of the buffer: a writer mid-flush if its header is sound;
        # if not, the length is garbage and only the careful path can say what follows.
        length, crc = struct.unpack_from("<QI", buf, pos)
        if _length_crc(length) != crc:
            return None
    if not len(starts):
        return Frames(starts, starts, pos)
    lengths = _gather(a, starts, 8, "<u8").astype(np.int64)
    if lengths.min() == lengths.max():   # one length (np.unique sorts: 10x the cost)
        distinct, which = lengths[:1], np.zeros(len(lengths), dtype=np.intp)
    else:
        distinct, which = np.unique(lengths, return_inverse=True)
    expected = np.array([_length_crc(int(n)) for n in distinct], dtype=np.uint32)
    if not np.array_equal(_gather(a, starts + 8, 4, "<u4"), expected[which]):
        return None
    data = starts + HEADER_SIZE
    stored = _unmask(_gather(a, data + lengths, 4, "<u4"))
    for group, length in enumerate(distinct.tolist()):
        at = data if len(distinct) == 1 else data[which == group]
        crcs = stored if len(distinct) == 1 else stored[which == group]
        if not _crcs_hold(buf, a, at, int(length), crcs):
            return None
    return Frames(starts, lengths, pos)


def _boundaries(buf: bytes, a: np.ndarray) -> tuple[np.ndarray, int]:
    """Where each complete record of `buf` starts, and where the first incomplete one does.

    Each length says where the next record starts, so this walks the lengths in Python;
    but writers repeat themselves (the same tags in the same order every step), so after a
    few records it looks for a cycle of record sizes and checks, for many cycles at once,
    that every record one cycle on has the same length field as its counterpart: where
    they all do, those boundaries are proven without visiting them one by one."""
    size = len(buf)
    last = size - HEADER_SIZE
    unpack = _U64.unpack_from
    pieces: list[np.ndarray] = []
    positions: list[int] = []
    pos = 0
    while pos <= last:
        for _ in range(WALK):
            end = pos + unpack(buf, pos)[0] + HEADER_SIZE + FOOTER_SIZE
            if end > size:
                break
            positions.append(pos)
            pos = end
            if pos > last:
                break
        else:
            cycle = _cycle(positions, pos)
            if cycle is None:
                continue
            total = sum(cycle)
            repeats = (size - pos) // total
            if repeats < 2:
                continue
            holds = np.ones(repeats, dtype=bool)
            offset = 0
            for record in cycle:
                here = np.lib.stride_tricks.as_strided(
                    a[pos + offset:], shape=(repeats, 8), strides=(total, 1), writeable=False)
                before = a[pos + offset - total:pos + offset - total + 8]
                holds &= (here == before).all(axis=1)
                offset += record
            proven = repeats if holds.all() else int(holds.argmin())
            if proven:
                pieces.append(np.array(positions, dtype=np.int64))
                positions = []
                within = np.cumsum([0, *cycle[:-1]])
                pieces.append((pos + np.add.outer(np.arange(proven) * total, within)).ravel())
                pos += proven * total
            continue
        break
    pieces.append(np.array(positions, dtype=np.int64))
    return np.concatenate(pieces), pos


def _cycle(positions: list[int], pos: int) -> list[int] | None:
    """The sizes of the shortest cycle the last records' sizes repeat, if any."""
    tail = [*positions[-2 * MAX_CYCLE:], pos]
    sizes = [b - a for a, b in zip(tail, tail[1:])]
    for period in range(1, len(sizes) // 2 + 1):
        if sizes[-period:] == sizes[-2 * period:-period]:
            return sizes[-period:]
    return None


def _crcs_hold(buf: bytes, a: np.ndarray, at: np.ndarray, length: int, crcs: np.ndarray) -> bool:
    """True if the records of `length` bytes at `at` have the CRCs `crcs` (see the module
    docstring: one CRC of the XOR of them all, for small records)."""
    import google_crc32c

    crc32c = google_crc32c.value
    if length > SMALL_RECORD or len(at) == 1:
        return all(crc32c(buf[p:p + length]) == c for p, c in zip(at.tolist(), crcs.tolist()))
    steps = np.diff(at)
    if len(at) > 1 and (steps == steps[0]).all():
        # Evenly spaced (a writer's records of one tag, or of a tag set written in the same
        # order every step): a strided view, no copy.
        rows = np.lib.stride_tricks.as_strided(a[int(at[0]):], shape=(len(at), length),
                                               strides=(int(steps[0]), 1), writeable=False)
    else:
        rows = a[at[:, None] + np.arange(length)]
    folded = np.bitwise_xor.reduce(rows, axis=0).tobytes() if length else b""
    expected = crc32c(folded) ^ (_zero_crc(length) if len(at) % 2 == 0 else 0)
    return int(np.bitwise_xor.reduce(crcs)) == expected


def decode(buf: bytes, a: np.ndarray, frames: Frames, decoder: EventDecoder, out: list[Scalar],
           limit: int | None = None, in_bulk: bool = True) -> tuple[int, bool]:
    """Append the scalars of `frames` to `out` as `EventDecoder.decode` would, in record
    order; with `limit`, stop before the first record that finds `out` that long already.
    Returns how many records were decoded (fewer than all, also, right after the first
    value of a tensor tag that says whether the tag is a scalar), and whether `limit`
    stopped it."""
    count = len(frames.starts)
    if not count:
        return 0, False
    data = frames.starts + HEADER_SIZE
    lengths = frames.lengths
    fast = (lengths >= 20) & (lengths <= (SMALL_RECORD if in_bulk else 0))
    fast &= (a[data] == 0x09) & (a[data + 9] == 0x10)    # 1: wall_time double, 2: step varint
    # The step: a varint of 1 to 9 bytes (10 bytes is a negative step: the careful path).
    varint = np.lib.stride_tricks.sliding_window_view(a, 9)[data + 10]
    more = varint >= 0x80
    fast &= ~more.all(axis=1)
    size = more.argmin(axis=1) + 1
    step = np.zeros(count, dtype=np.uint64)
    for k in range(int(size[fast].max()) if fast.any() else 0):
        step |= np.where(k < size, (varint[:, k] & 0x7F).astype(np.uint64) << np.uint64(7 * k), 0)
    end = data + lengths
    q = data + 10 + size                                   # 5: summary, to the end of the event
    fast &= a[q] == 0x2A
    q, ok = _length_to(a, q + 1, end)
    fast &= ok & (a[q] == 0x0A)                            # its one value (1), to the end
    q, ok = _length_to(a, q + 1, end)
    fast &= ok & (a[q] == 0x0A) & (a[q + 1] < 0x80)       # the value's tag (1), under 128 bytes
    tag_start = q + 2
    tag_end = tag_start + a[q + 1]
    simple = (a[tag_end] == 0x15) & (tag_end + 5 == end)   # 2: simple_value, float
    # 8: tensor {dtype = 1 (float) or 2 (double), maybe tensor_shape {} (a scalar: TF2
    # writes it, torch leaves it out), the value as tensor_content (4) or packed float_val (5)
    # or double_val (6)}, and maybe metadata (9) after it.
    t = tag_end + 2
    dtype = a[t + 1]
    v = t + 2 + 2 * ((a[t + 2] == 0x12) & (a[t + 3] == 0))
    kind, width = a[v], a[v + 1]
    as_float = (dtype == 1) & (width == 4) & ((kind == 0x22) | (kind == 0x2A))
    as_double = (dtype == 2) & (width == 8) & ((kind == 0x22) | (kind == 0x32))
    tensor_end = v + 2 + width
    tensor = ((a[tag_end] == 0x42) & (t + a[tag_end + 1] == tensor_end) & (a[t] == 0x08)
              & (as_float | as_double)
              & ((tensor_end == end) | ((a[tensor_end] == 0x4A) & (a[tensor_end + 1] < 0x80)
                                        & (tensor_end + 2 + a[tensor_end + 1] == end))))
    fast &= simple | tensor
    rows = np.flatnonzero(fast)
    if limit is not None and len(rows) > max(limit - len(out), 0):
        # A record here yields one scalar: those past the page's room are left for the next
        # read (or decoded one at a time by _merge, should the careful ones yield none).
        fast[rows[max(limit - len(out), 0):]] = False
        rows = rows[:max(limit - len(out), 0)]
    tags = _tags(buf, a, tag_start[rows], (tag_end - tag_start)[rows], decoder)
    tensors = tensor[rows]
    cut = count                          # records decoded this time
    ok = [tag is not None for tag in tags] if None in tags else [True] * len(tags)
    if tensors.any():
        # A tensor is a scalar only if its tag's first metadata said so: a tag declared no
        # scalar goes the careful way (which yields nothing). For a tag not declared yet,
        # what comes before its value may declare it: any record of the careful way, or a
        # value with metadata. So this call stops before the first undeclared value if
        # such a record precedes it; if none does, the value is final as it stands (it
        # goes the careful way: it declares, or yields nothing), and the call stops after
        # it if it declares, else before the next record that might.
        known = decoder._is_scalar
        said = [known.get(tag) if is_tensor else True for tag, is_tensor in zip(tags, tensors.tolist())]
        if None in said:
            first = said.index(None)
            u = int(rows[first])
            declaring = (tensor_end != end)[rows]
            may_declare = np.flatnonzero(~fast[:count]) if not declaring.any() else np.union1d(
                np.flatnonzero(~fast[:count]), rows[declaring & np.array([x is None for x in said])])
            before = may_declare[may_declare < u]
            if len(before):
                cut = u
            elif declaring[first]:
                cut = u + 1
            else:
                after = may_declare[may_declare > u]
                cut = int(after[0]) if len(after) else count
        ok = [o and s is True for o, s in zip(ok, said)]
    if cut < count or False in ok:
        keep = np.array(ok, dtype=bool) & (rows < cut)
        fast[rows[~keep]] = False
        rows, tensors = rows[keep], tensors[keep]
        tags = [tag for tag, k in zip(tags, keep.tolist()) if k]
    values = _gather(a, tag_end[rows] + 1, 4, "<f4").astype(np.float64)
    if tensors.any():
        at = v[rows] + 2
        floats = tensors & as_float[rows]
        values[floats] = _gather(a, at[floats], 4, "<f4")
        doubles = tensors & as_double[rows]
        values[doubles] = _gather(a, at[doubles], 8, "<f8")
    walls = _gather(a, data[rows] + 1, 8, "<f8")
    made = scalars(tags, step[rows].astype(np.int64).tolist(), walls.tolist(), values.tolist(),
                   decoder.run)
    slow = np.flatnonzero(~fast[:cut]).tolist()
    return _merge(buf, frames, slow, made, decoder, out, limit, cut)


def _length_to(a: np.ndarray, at: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where the payload of the length varints (1 or 2 bytes) at `at` starts, and whether
    it runs exactly to `end`."""
    low, high = a[at].astype(np.int64), a[at + 1].astype(np.int64)
    two = low >= 0x80
    length = np.where(two, (low & 0x7F) | (high << 7), low)
    start = at + 1 + two
    return start, (~two | (high < 0x80)) & (start + length == end)


def _tags(buf: bytes, a: np.ndarray, starts: np.ndarray, lengths: np.ndarray,
          decoder: EventDecoder) -> list[str | None]:
    """The tag at each of `starts` (`lengths` bytes, under 128), decoded once per distinct
    tag; None where it is not UTF-8 (the careful path then counts the record undecodable).

    Slicing each tag out to look it up cost more than the rest of the decode together, so
    the tags are told apart in bulk: each one's bytes (zero-padded to whole words) hashed
    with a few multiply-xors, the hashes made unique, and every tag then compared byte
    for byte with the first one of its hash, so a collision cannot mislabel a point."""
    if not len(starts):
        return []
    width = (int(lengths.max()) + 8) & ~7
    rows = np.lib.stride_tricks.sliding_window_view(a, width)[starts]
    rows *= np.arange(width) < lengths[:, None]
    words = rows.view("<u8")
    hashes = lengths.astype(np.uint64) * _PRIME
    for column in words.T:
        hashes = (hashes ^ column) * _PRIME
    if hashes.min() == hashes.max():    # one tag (np.unique sorts)
        first, inverse = np.zeros(1, dtype=np.intp), np.zeros(len(hashes), dtype=np.intp)
    else:
        _, first, inverse = np.unique(hashes, return_index=True, return_inverse=True)
        inverse = inverse.ravel()
    if not (rows == rows[first][inverse]).all():
        first, inverse = _unique_rows(rows)  # a hash collision: tell them apart the slow way
    cache = decoder._tag_cache
    names = []
    for start, length in zip(starts[first].tolist(), lengths[first].tolist()):
        raw = buf[start:start + length]
        name = cache.get(raw)
        if name is None:
            try:
                name = cache[raw] = raw.decode()
            except UnicodeDecodeError:
                pass
        names.append(name)
    table = np.empty(len(names), dtype=object)
    table[:] = names
    return table[inverse].tolist()


def _unique_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    _, first, inverse = np.unique(rows, axis=0, return_index=True, return_inverse=True)
    return first, inverse.ravel()


def _merge(buf: bytes, frames: Frames, slow: list[int], scalars: list[Scalar],
           decoder: EventDecoder, out: list[Scalar], limit: int | None, count: int) -> tuple[int, bool]:
    """Put the bulk-decoded `scalars` (one per record not in `slow`) and the records of
    `slow`, decoded one at a time, into `out` in record order, up to `limit`, and the
    first `count` records only: (records decoded, whether `limit` stopped it)."""
    taken = done = 0                     # scalars of `scalars` used; records decoded
    for record in [*slow, count]:
        run = record - done              # bulk records before this one
        if limit is not None:
            room = limit - len(out)
            if room < run:
                out.extend(scalars[taken:taken + max(room, 0)])
                return done + max(room, 0), True
        out.extend(scalars[taken:taken + run])
        taken += run
        done = record
        if record == count:
            break
        if limit is not None and len(out) >= limit:
            return done, True
        start = int(frames.starts[record]) + HEADER_SIZE
        decoder.decode([buf[start:start + int(frames.lengths[record])]], out)
        done += 1
    return done, False


def _decode_cycles(buf: bytes, a: np.ndarray, frames: Frames, first: int, most: int,
                   decoder: EventDecoder, out: list[Scalar]) -> tuple[int, int]:
    """Decode up to `most` records of `frames` from record `first` on, where they repeat a
    cycle: every record a scalar laid out as torch writes one (`_simple_layout`), and every
    cycle of records byte for byte the first one but for each record's wall time, step,
    value and checksum (the same tags in the same order every step, as a writer of scalars
    writes them). Then no record needs looking at on its own: each tag is read once per
    position in the cycle, and the numbers from computed positions. Returns the records
    decoded, whole cycles from `first`, up to the first cycle that differs (0 where fewer
    than two cycles of at most MAX_CYCLE records repeat: the general way decodes them), and
    how many records of that cycle come before the first one that differs (a tag written
    now and then, a step whose varint grew), past which a new cycle may start; -1 where
    none differs."""
    start = int(frames.starts[first])
    room = min(frames.end, len(buf)) - start     # bytes of complete records from `start`
    layouts: list[tuple[int, int, int]] = []     # (Event start, step size, value start) from `start`
    tags: list[str] = []
    cache = decoder._tag_cache
    total = 0
    for record in range(first, first + min(MAX_CYCLE + 1, most)):
        length = int(frames.lengths[record])
        data = total + HEADER_SIZE
        layout = _simple_layout(buf, start + data, start + data + length)
        if layout is None:
            return 0, 0
        step_size, tag_start, tag_end = layout
        if layouts and tag_end - tag_start == len(tags[0]) and layout[0] == layouts[0][1] \
                and length == int(frames.lengths[first]) and buf[tag_start:tag_end] == tags[0].encode():
            # This record looks like the first one: maybe a cycle of the records before it.
            # Proven if the next cycle's bytes are the first's but for the numbers.
            varying = _varying(layouts, total)
            if 2 * total <= room and ((a[start + total:start + 2 * total] == a[start:start + total]) | varying).all():
                break
        if len(layouts) == MAX_CYCLE:
            return 0, 0
        raw = buf[tag_start:tag_end]
        tag = cache.get(raw)
        if tag is None:
            try:
                tag = cache[raw] = raw.decode()
            except UnicodeDecodeError:
                return 0, 0
        layouts.append((data, step_size, tag_end + 1 - start))
        tags.append(tag)
        total = data + length + FOOTER_SIZE
    else:
        return 0, 0
    # The whole cycles that fit; each is checked against the first below, byte for byte
    # (its headers too, so its record boundaries are the first cycle's).
    cycles = min(room // total, most // len(layouts))
    cycle_starts = start + np.arange(cycles, dtype=np.int64) * total
    rows = np.lib.stride_tricks.as_strided(a[start:], shape=(cycles, total), strides=(total, 1),
                                           writeable=False)
    same = np.ones(cycles, dtype=bool)
    same[1:] = ((rows[1:] == rows[0]) | varying).all(axis=1)
    # A step must be a varint of the first cycle's size: the continuation bit on every byte
    # but its last. (Checked, not assumed: a step of another size would move every byte after it.)
    datas = np.array([data for data, _, _ in layouts])
    step_sizes = np.array([step_size for _, step_size, _ in layouts])
    varint = np.lib.stride_tricks.sliding_window_view(a, 9)[np.add.outer(cycle_starts, datas + 10)]
    within = np.arange(9) < step_sizes[:, None]                   # (record of the cycle, byte)
    more = np.arange(9) < step_sizes[:, None] - 1
    same &= (((varint >= 0x80) == more) | ~within).all(axis=(1, 2))
    alike = -1                                   # no cycle differs
    if not same.all():
        cycles = int(same.argmin())
        if cycles < 2:
            return 0, 0
        # The first record of the next cycle that differs from its counterpart: its header
        # (every record's starts where the first cycle's does, up to it), or a byte after.
        differs = np.flatnonzero(~((rows[cycles] == rows[0]) | varying))
        record_starts = np.array([data - HEADER_SIZE for data, _, _ in layouts])
        if len(differs):
            alike = int(np.searchsorted(record_starts, differs[0], side="right")) - 1
        varint, cycle_starts = varint[:cycles], cycle_starts[:cycles]
    step = np.zeros(varint.shape[:2], dtype=np.uint64)
    for k in range(int(step_sizes.max())):
        step |= np.where(within[:, k], (varint[:, :, k] & 0x7F).astype(np.uint64) << np.uint64(7 * k), 0)
    walls = _gather(a, np.add.outer(cycle_starts, datas + 1).ravel(), 8, "<f8")
    value_ats = np.array([value_at for _, _, value_at in layouts])
    values = _gather(a, np.add.outer(cycle_starts, value_ats).ravel(), 4, "<f4").astype(np.float64)
    out.extend(scalars(tags * cycles, step.ravel().astype(np.int64).tolist(), walls.tolist(), values.tolist(),
                       decoder.run))
    return cycles * len(layouts), alike


def _varying(layouts: list[tuple[int, int, int]], total: int) -> np.ndarray:
    """The bytes of a cycle of records that one cycle may change against another: each
    record's wall time, step, value and checksum."""
    varying = np.zeros(total, dtype=bool)
    for data, step_size, value_at in layouts:
        varying[data + 1:data + 9] = True                         # wall_time
        varying[data + 10:data + 10 + step_size] = True           # step
        varying[value_at:value_at + 4 + FOOTER_SIZE] = True       # simple_value, the record's CRC
    return varying


def _simple_layout(buf: bytes, data: int, end: int) -> tuple[int, int, int] | None:
    """(step varint size, tag start, tag end) of the Event in buf[data:end] if it is laid out
    as `decode` reads in bulk, with a `simple_value`: wall_time, step (1 to 9 bytes), one
    summary of one value: a tag under 128 bytes, then the float, to the end. Else None."""
    if end - data < 20 or end - data > SMALL_RECORD or buf[data] != 0x09 or buf[data + 9] != 0x10:
        return None
    size = 1
    while buf[data + 9 + size] >= 0x80:
        size += 1
        if size > 9:
            return None
    q = data + 10 + size
    for key in (0x2A, 0x0A):                # the summary, then its one value, each to the end
        if buf[q] != key:
            return None
        length, q = buf[q + 1], q + 2
        if length >= 0x80:
            if buf[q] >= 0x80:
                return None
            length, q = (length & 0x7F) | (buf[q] << 7), q + 1
        if q + length != end:
            return None
    if buf[q] != 0x0A or buf[q + 1] >= 0x80:
        return None
    tag_start = q + 2
    tag_end = tag_start + buf[q + 1]
    if tag_end + 5 != end or buf[tag_end] != 0x15:
        return None
    return size, tag_start, tag_end


def read_scalars(f, offset: int, tail: bytes, decoder: EventDecoder, out: list[Scalar], *,
                 limit: int | None = None, max_bytes: int | None = None,
                 chunk_size: int = CHUNK_SIZE) -> RecordBatch:
    """Read the complete records from `offset` on in the open file `f` and decode their
    scalars into `out`: `records.read_records` and `EventDecoder.decode` in one pass, a
    chunk at a time, so no record is held as its own bytes object.

    Stops before the first record that finds `out` `limit` long, or at the first chunk that
    takes it past `max_bytes` of records; then `at_end` is False and `next_offset` is the
    first record not decoded. The batch's `records` stay empty; `tail` is as in
    `read_records`."""
    return read_framed(f, offset, tail, lambda buf, base: _consume(buf, base, decoder, out, limit),
                       lambda: limit is None or len(out) < limit, chunk_size=chunk_size, max_bytes=max_bytes)


def _consume(buf: bytes, base: int, decoder: EventDecoder, out: list[Scalar],
             limit: int | None) -> tuple[int, int, bool]:
    """Decode the records of `buf` (file bytes from `base`) into `out`: (bytes consumed,
    records skipped as corrupt, whether `limit` stopped it before the last record)."""
    frames = None
    if len(buf) <= MAX_BUFFER:
        a = np.frombuffer(buf + bytes(_PAD), dtype=np.uint8)
        frames = scan(buf, a)
    if frames is not None:
        count = len(frames.starts)
        done = 0
        rounds = 0
        retry_at = singles = 0           # where to look for a cycle next; misses since the last cycle
        while done < count:
            room = count if limit is None else max(limit - len(out), 0)
            if done >= retry_at:
                taken, alike = _decode_cycles(buf, a, frames, done, min(count - done, room), decoder, out)
                done += taken
                if limit is not None and len(out) >= limit:
                    break
                if taken:
                    # Where the records went on unlike the cycle, a new one may start past the odd one.
                    singles = 0
                    retry_at = done + alike + 1 if alike >= 0 else done
                    continue
                # A cycle may start a record or two on (past a file's first record, or where
                # one broke); else the general way takes the rest of the chunk.
                singles += 1
                retry_at = done + 1 if singles <= MAX_SINGLES else count
            # Only as many records as the page has room for (and a few, for records that
            # hold no scalar): a small page costs small temporaries.
            stop = min(count, done + room + SLACK, max(retry_at, done + 1))
            if stop - done <= FEW:
                # A few records (the end of a chunk past its last whole cycle): numpy's fixed
                # cost per call is more than decoding them one at a time.
                records = [buf[p + HEADER_SIZE:p + HEADER_SIZE + n]
                           for p, n in zip(frames.starts[done:stop].tolist(), frames.lengths[done:stop].tolist())]
                decoded = decoder.decode(records, out, limit)
                done += decoded
                if decoded < len(records):
                    break
                continue
            part = Frames(frames.starts[done:stop], frames.lengths[done:stop], 0)
            # Tags declared one by one (see decode) cost a call each: past a few, the rest
            # of the chunk goes one record at a time.
            rounds += 1
            decoded, full = decode(buf, a, part, decoder, out, limit, in_bulk=rounds <= MAX_ROUNDS)
            done += decoded
            if full or (limit is not None and len(out) >= limit):
                break
        if done < count:
            return int(frames.starts[done]), 0, True
        return frames.end, 0, False
    # Something unusual (a bad checksum, a huge record): the record-at-a-time path.
    batch = parse_records(buf, base)
    records = batch.records
    decoded = decoder.decode(records, out, limit)
    if decoded < len(records) and not batch.corrupt:
        # Records lie back to back here, so the first one not decoded starts after those that were.
        return sum(map(len, records[:decoded])) + (HEADER_SIZE + FOOTER_SIZE) * decoded, 0, True
    if decoded < len(records):  # a skipped stretch in between: where they lie is unknown
        decoder.decode(records[decoded:], out)
    return batch.next_offset - base, batch.corrupt, False
