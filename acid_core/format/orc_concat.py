"""Concatenating ORC files stripe by stripe into one file, without decoding a row (what Hive's OrcFileMergeOperator
does for ALTER TABLE ... CONCATENATE): how several tasks compact one bucket into the one `bucket_N` file Hive reads.

An ORC file is `"ORC" [stripes] [metadata] [footer] [postscript] [1 byte: postscript length]`; every stripe is
self-contained (its own indexes, data and stripe footer, positions relative to the stripe), so the stripes of files
with the same schema, compression and block size can be copied as bytes. The new tail lists them with their new
offsets (Footer.stripes), keeps every stripe's statistics (Metadata.stripeStats, copied), and sums the file-level
statistics' counts (numberOfValues, hasNull, bytesOnDisk); typed file-level minimums and maximums are left out
(optional in ORC: readers then assume nothing, and predicate push-down uses the stripe statistics, which stay exact).
User metadata is given by the caller. Formats: apache/orc `orc_proto.proto` (PostScript, Footer, StripeInformation,
Metadata, StripeStatistics, ColumnStatistics); the tail's byte handling is `orc_tail`'s.
Memory: a copy buffer and the tails; time: one pass over the bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from acid_core.errors import CorruptFileError, SchemaMismatchError
from acid_core.format.orc_tail import (
    _compress,
    _decompress,
    _fields,
    _length_delimited,
    _read_varint,
    _varint,
    parse_postscript,
)
from acid_core.storage.fs import FileSystem

_HEADER = b"ORC"
_COPY_CHUNK = 8 << 20
# PostScript fields
_PS_FOOTER_LENGTH, _PS_METADATA_LENGTH = 1, 5
# Footer fields
_F_HEADER_LENGTH, _F_CONTENT_LENGTH, _F_STRIPES, _F_TYPES, _F_METADATA, _F_ROWS, _F_STATISTICS = 1, 2, 3, 4, 5, 6, 7
# StripeInformation, Metadata, ColumnStatistics fields
_SI_OFFSET, _SI_ROWS = 1, 5
_M_STRIPE_STATS = 1
_CS_VALUES, _CS_HAS_NULL, _CS_BYTES_ON_DISK = 1, 10, 11


def _payload(raw: bytes) -> bytes:
    """The bytes of a length-delimited field value as `_fields` returns it (with its length prefix)."""
    length, start = _read_varint(raw, 0)
    return raw[start:start + length]


def _uint(raw: bytes) -> int:
    return _read_varint(raw, 0)[0]


def _field(number: int, wire: int, raw: bytes) -> bytes:
    return _varint(number << 3 | wire) + raw


@dataclass(frozen=True)
class _Part:
    path: str
    content_length: int
    compression: int
    block_size: int
    postscript: bytes
    footer: list[tuple[int, int, bytes]]
    stripe_stats: list[bytes]  # raw Metadata.stripeStats values

    def values(self, number: int) -> list[bytes]:
        return [raw for n, _, raw in self.footer if n == number]

    def same_layout(self) -> tuple:
        return (self.compression, self.block_size, tuple(self.values(_F_TYPES)))


def _read_part(fs: FileSystem, path: str) -> _Part:
    with fs.open_input(path) as handle:
        return read_tail(handle, path)


def read_tail(handle, path: str) -> _Part:
    """The tail (postscript, footer, stripe statistics) of the ORC file open as `handle` (a random-access file).

    Raises:
        CorruptFileError: not an ORC file this code understands.
    """
    size = handle.size()
    if size < 4:
        raise CorruptFileError(f"{path}: not an ORC file ({size} bytes)")
    ps_length = handle.read_at(1, size - 1)[0]
    postscript = parse_postscript(handle.read_at(ps_length, size - 1 - ps_length))
    metadata_length = next((_uint(raw) for n, w, raw in _fields(postscript.raw)
                            if n == _PS_METADATA_LENGTH and w == 0), 0)
    tail_length = metadata_length + postscript.footer_length
    if tail_length + ps_length + 1 > size:
        raise CorruptFileError(f"{path}: ORC tail of {tail_length + ps_length + 1} bytes exceeds the file ({size})")
    tail = handle.read_at(tail_length, size - 1 - ps_length - tail_length)
    footer = _fields(_decompress(tail[metadata_length:], postscript.compression))
    metadata = _fields(_decompress(tail[:metadata_length], postscript.compression)) if metadata_length else []
    part = _Part(path, 0, postscript.compression, postscript.block_size, postscript.raw, footer,
                 [raw for n, _, raw in metadata if n == _M_STRIPE_STATS])
    content = part.values(_F_CONTENT_LENGTH)
    if not content:
        raise CorruptFileError(f"{path}: ORC footer has no contentLength")
    return _Part(path, _uint(content[0]), part.compression, part.block_size, part.postscript, footer,
                 part.stripe_stats)


def stripe_row_counts(fs: FileSystem, path: str) -> list[int]:
    """The number of rows of each stripe of an ORC file, from its footer (which pyarrow does not expose).

    Raises:
        CorruptFileError: not an ORC file this code understands.
    """
    counts = []
    for raw in _read_part(fs, path).values(_F_STRIPES):
        rows = [_uint(value) for number, wire, value in _fields(_payload(raw)) if number == _SI_ROWS and wire == 0]
        counts.append(rows[0] if rows else 0)
    return counts


def _moved_stripe(raw: bytes, shift: int) -> bytes:
    """A StripeInformation (raw, with length prefix) with its offset moved by `shift`."""
    fields = []
    for number, wire, value in _fields(_payload(raw)):
        if number == _SI_OFFSET and wire == 0:
            value = _varint(_uint(value) + shift)
        fields.append(_field(number, wire, value))
    body = b"".join(fields)
    return _varint(len(body)) + body


def _summed_statistics(parts: Sequence[_Part]) -> list[bytes]:
    """File-level ColumnStatistics per column: counts summed, typed statistics left out."""
    columns = [part.values(_F_STATISTICS) for part in parts]
    if len({len(c) for c in columns}) != 1:
        raise CorruptFileError("ORC files to concatenate have different numbers of column statistics")
    merged = []
    for per_part in zip(*columns):
        values = has_null = on_disk = 0
        known_on_disk = True
        for raw in per_part:
            fields = {n: v for n, w, v in _fields(_payload(raw)) if w == 0}
            values += _uint(fields[_CS_VALUES]) if _CS_VALUES in fields else 0
            has_null |= _uint(fields[_CS_HAS_NULL]) if _CS_HAS_NULL in fields else 0
            if _CS_BYTES_ON_DISK in fields:
                on_disk += _uint(fields[_CS_BYTES_ON_DISK])
            else:
                known_on_disk = False
        body = _field(_CS_VALUES, 0, _varint(values)) + _field(_CS_HAS_NULL, 0, _varint(has_null))
        if known_on_disk:
            body += _field(_CS_BYTES_ON_DISK, 0, _varint(on_disk))
        merged.append(_varint(len(body)) + body)
    return merged


def _header_length(part: _Part) -> int:
    return _uint(part.values(_F_HEADER_LENGTH)[0]) if part.values(_F_HEADER_LENGTH) else len(_HEADER)


def _output(fs: FileSystem, destination: str, first: _Part, consume_first: bool):
    """The file to write and whether it is the first source (cut after its stripes, appended to; local only) or a
    new `destination`."""
    if consume_first and _header_length(first) == len(_HEADER):
        stream = fs.cut_for_appending(first.path, len(_HEADER) + first.content_length)
        if stream is not None:
            return stream, True
    stream = fs.open_output(destination)
    stream.write(_HEADER)
    return stream, False


def concatenate(fs: FileSystem, sources: Sequence[str], destination: str, *,
                user_metadata: Mapping[str, bytes], consume_first: bool = False) -> int:
    """Write to `destination` (a new file) one ORC file holding the stripes of `sources`, in that order, and
    `user_metadata` as its only user metadata. Returns the number of rows.

    `consume_first`: the first source may be used up; on a local filesystem it is then cut after its stripes, the
    others' stripes and the new tail are appended to it and it is renamed to `destination`, so its bytes are not
    copied (elsewhere, or if it is not laid out as usual, it is copied as the others are and left as it was).

    Raises:
        SchemaMismatchError: the sources differ in schema, compression or compression block size.
        CorruptFileError: a source is not an ORC file this code understands.
    """
    if not sources:
        raise SchemaMismatchError(f"{destination}: nothing to concatenate")
    parts = [_read_part(fs, path) for path in sources]
    if len({part.same_layout() for part in parts}) != 1:
        raise SchemaMismatchError(f"{destination}: the files to concatenate differ in schema or compression "
                                  f"({', '.join(sources)})")
    first = parts[0]
    out, reuse = _output(fs, destination, first, consume_first and len(set(sources)) == len(sources))
    stripes, stripe_stats, rows = [], [], 0
    position = len(_HEADER)
    with out:
        for index, part in enumerate(parts):
            header = _header_length(part)
            stripes += [_moved_stripe(raw, position - header) for raw in part.values(_F_STRIPES)]
            stripe_stats += part.stripe_stats
            rows += sum(_uint(raw) for raw in part.values(_F_ROWS))
            if reuse and index == 0:  # its stripes are in place already
                position += part.content_length
                continue
            with fs.open_input(part.path) as handle:  # contentLength: the stripes' bytes, after the header
                handle.seek(header)
                left = part.content_length
                while left:
                    chunk = handle.read_buffer(min(_COPY_CHUNK, left))  # an Arrow buffer: not copied into Python
                    if not chunk.size:
                        raise CorruptFileError(f"{part.path}: shorter than its footer says")
                    out.write(chunk)
                    left -= chunk.size
            position += part.content_length
        metadata = b"".join(_field(_M_STRIPE_STATS, 2, raw) for raw in stripe_stats)
        footer = [_field(_F_HEADER_LENGTH, 0, _varint(len(_HEADER))),
                  _field(_F_CONTENT_LENGTH, 0, _varint(position - len(_HEADER))),
                  *[_field(_F_STRIPES, 2, raw) for raw in stripes],
                  *[_field(_F_TYPES, 2, raw) for raw in first.values(_F_TYPES)],
                  *[_length_delimited(_F_METADATA, _length_delimited(1, key.encode()) + _length_delimited(2, value))
                    for key, value in user_metadata.items()],
                  _field(_F_ROWS, 0, _varint(rows)),
                  *[_field(_F_STATISTICS, 2, raw) for raw in _summed_statistics(parts)],
                  *[_field(n, w, raw) for n, w, raw in first.footer  # rowIndexStride, writer, calendar, version
                    if n not in (_F_HEADER_LENGTH, _F_CONTENT_LENGTH, _F_STRIPES, _F_TYPES, _F_METADATA, _F_ROWS,
                                 _F_STATISTICS)]]
        packed_metadata = _compress(metadata, first.compression, first.block_size)
        packed_footer = _compress(b"".join(footer), first.compression, first.block_size)
        postscript = []
        for number, wire, value in _fields(first.postscript):
            if number == _PS_FOOTER_LENGTH and wire == 0:
                value = _varint(len(packed_footer))
            elif number == _PS_METADATA_LENGTH and wire == 0:
                value = _varint(len(packed_metadata))
            postscript.append(_field(number, wire, value))
        encoded = b"".join(postscript)
        if len(encoded) > 255:
            raise CorruptFileError(f"{destination}: postscript would exceed 255 bytes")
        out.write(packed_metadata + packed_footer + encoded + bytes((len(encoded),)))
    if reuse:
        fs.rename(first.path, destination)
    return rows
