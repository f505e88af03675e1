"""A view of an ORC file that holds only some of its stripes: how a read starts at stripe k and streams it in
row batches without decoding stripes 0..k-1.

pyarrow's ORC reader streams a file in bounded batches (the dataset scanner drives ORC's row reader), but only from
the first stripe; its `read_stripe` starts anywhere but decodes a whole stripe at once, and a stripe written by Hive
(64 MiB of compressed streams) decodes to hundreds of MiB. Every stripe is self-contained and found through the
footer's list (StripeInformation: offset, lengths, rows), so a file-like view that serves the original bytes up to
the end of the stripes, followed by a new footer listing only the wanted stripes (offsets unchanged) and a
postscript that points at it, is an ORC file of exactly those stripes: the streaming reader reads it as such.
Nothing is copied or written; the view is read-only.

The new footer keeps the schema and the writer's fields and drops what would no longer be true of the shorter file:
the file-level column statistics and the stripe statistics (both optional in ORC; reading needs neither) and the
user metadata. Formats: apache/orc `orc_proto.proto`; the tail's parsing is `orc_concat.read_tail`'s.
Memory: the tail; time: one footer re-encoding per view.
"""

from __future__ import annotations

from acid_core.errors import CorruptFileError
from acid_core.format.orc_concat import (
    _F_METADATA,
    _F_ROWS,
    _F_STATISTICS,
    _F_STRIPES,
    _PS_FOOTER_LENGTH,
    _PS_METADATA_LENGTH,
    _SI_ROWS,
    _field,
    _header_length,
    _payload,
    _uint,
    read_tail,
)
from acid_core.format.orc_tail import _compress, _fields, _varint

_PS_STRIPE_STATISTICS_LENGTH = 7


_SEEK_SET, _SEEK_CUR, _SEEK_END = 0, 1, 2


class StripeRangeFile:
    """The ORC file open as `handle` (a random-access pyarrow file) seen as holding only stripes `first`..`stop - 1`:
    a read-only file object (read, seek, tell) for pyarrow to wrap; `handle` stays the caller's to close.

    Raises:
        CorruptFileError: not an ORC file this code understands, or the range is not within its stripes.
    """

    def __init__(self, handle, path: str, first: int, stop: int) -> None:
        part = read_tail(handle, path)
        stripes = part.values(_F_STRIPES)
        if not 0 <= first < stop <= len(stripes):
            raise CorruptFileError(f"{path}: stripes {first}..{stop - 1} asked for, the file has {len(stripes)}")
        kept = stripes[first:stop]
        rows = 0
        for raw in kept:
            rows += next((_uint(v) for n, w, v in _fields(_payload(raw)) if n == _SI_ROWS and w == 0), 0)
        footer = []
        for number, wire, raw in part.footer:
            if number == _F_STRIPES:
                continue  # re-added below, only the kept ones, where the first stripe was
            if number in (_F_STATISTICS, _F_METADATA):
                continue
            footer.append(_field(_F_ROWS, 0, _varint(rows)) if number == _F_ROWS else _field(number, wire, raw))
        position = next((i for i, (n, _, _) in enumerate(part.footer) if n == _F_STRIPES), len(footer))
        footer[position:position] = [_field(_F_STRIPES, 2, raw) for raw in kept]
        packed = _compress(b"".join(footer), part.compression, part.block_size)
        postscript = []
        for number, wire, value in _fields(part.postscript):
            if number == _PS_FOOTER_LENGTH and wire == 0:
                value = _varint(len(packed))
            elif number in (_PS_METADATA_LENGTH, _PS_STRIPE_STATISTICS_LENGTH) and wire == 0:
                value = _varint(0)
            postscript.append(_field(number, wire, value))
        encoded = b"".join(postscript)
        if len(encoded) > 255:
            raise CorruptFileError(f"{path}: postscript would exceed 255 bytes")
        self.rows = rows
        self._handle = handle
        self._content_end = _header_length(part) + part.content_length
        self._tail = packed + encoded + bytes((len(encoded),))
        self._size = self._content_end + len(self._tail)
        self._position = 0
        self.closed = False

    def close(self) -> None:
        self.closed = True

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def size(self) -> int:
        return self._size

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = _SEEK_SET) -> int:
        base = {_SEEK_SET: 0, _SEEK_CUR: self._position, _SEEK_END: self._size}[whence]
        self._position = max(0, base + offset)
        return self._position

    def read(self, size: int = -1) -> bytes:
        start = self._position
        end = self._size if size is None or size < 0 else min(self._size, start + size)
        if end <= start:
            return b""
        pieces = []
        if start < self._content_end:
            stop = min(end, self._content_end)
            pieces.append(self._handle.read_at(stop - start, start))
        if end > self._content_end:
            pieces.append(self._tail[max(start, self._content_end) - self._content_end:end - self._content_end])
        self._position = end
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    def readinto(self, buffer) -> int:
        data = self.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)
