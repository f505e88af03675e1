"""Adding ORC user metadata to a finished ORC file's tail (footer + postscript), as pure byte transformations.

pyarrow's columnar ORC writer is fast but cannot set user metadata, which Hive's readers need in ACID files
(`hive.acid.key.index`, `hive.acid.stats`, `hive.acid.version`). A file ends with
`[metadata][footer][postscript][1 byte: postscript length]`; the footer is a protobuf message (compressed in chunks)
whose field 5 is `repeated UserMetadataItem metadata`. Protobuf allows appending fields to a serialized message, so
the new footer is the old one plus the new items; the postscript is re-encoded with the new footer length.
Formats: apache/orc `orc_proto.proto` (PostScript, Footer, UserMetadataItem) and the ORC v1 spec's compression
chunks (3-byte little-endian header = length << 1 | is_original; zlib is raw deflate, snappy is raw snappy).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import pyarrow as pa

from acid_core.errors import CorruptFileError

NONE, ZLIB, SNAPPY = 0, 1, 2
_FOOTER_LENGTH, _COMPRESSION, _BLOCK_SIZE = 1, 2, 3
_FOOTER_METADATA = 5


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_varint(data: bytes, position: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if position >= len(data):
            raise CorruptFileError("ORC postscript ends inside a varint")
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, position
        shift += 7


def _fields(message: bytes) -> list[tuple[int, int, bytes]]:
    """(field number, wire type, raw encoded value) of every field, in order."""
    fields, position = [], 0
    while position < len(message):
        key, value_start = _read_varint(message, position)
        number, wire = key >> 3, key & 7
        if wire == 0:
            _, end = _read_varint(message, value_start)
        elif wire == 1:
            end = value_start + 8
        elif wire == 2:
            length, data_start = _read_varint(message, value_start)
            end = data_start + length
        elif wire == 5:
            end = value_start + 4
        else:
            raise CorruptFileError(f"ORC postscript has unsupported protobuf wire type {wire}")
        fields.append((number, wire, message[value_start:end]))
        position = end
    return fields


def _length_delimited(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


@dataclass(frozen=True, slots=True)
class PostScript:
    raw: bytes
    footer_length: int
    compression: int
    block_size: int


def parse_postscript(raw: bytes) -> PostScript:
    values = {number: _read_varint(value, 0)[0] for number, wire, value in _fields(raw) if wire == 0}
    return PostScript(raw, values.get(_FOOTER_LENGTH, 0), values.get(_COMPRESSION, NONE), values.get(_BLOCK_SIZE, 262144))


def _decompress(data: bytes, kind: int) -> bytes:
    if kind == NONE:
        return data
    out, position = bytearray(), 0
    while position < len(data):
        header = data[position] | data[position + 1] << 8 | data[position + 2] << 16
        length, original = header >> 1, header & 1
        chunk = data[position + 3:position + 3 + length]
        position += 3 + length
        if original:
            out += chunk
        elif kind == ZLIB:
            out += zlib.decompress(chunk, -15)
        elif kind == SNAPPY:
            size, _ = _read_varint(chunk, 0)
            out += pa.Codec("snappy").decompress(chunk, decompressed_size=size, asbytes=True)
        else:
            raise CorruptFileError(f"ORC compression kind {kind} is not supported here (ZLIB, SNAPPY or NONE)")
    return bytes(out)


def _compress(data: bytes, kind: int, block_size: int) -> bytes:
    if kind == NONE:
        return data
    out = bytearray()
    for start in range(0, len(data), block_size):
        chunk = data[start:start + block_size]
        if kind == ZLIB:
            packer = zlib.compressobj(6, zlib.DEFLATED, -15)
            packed = packer.compress(chunk) + packer.flush()
        else:
            packed = pa.Codec("snappy").compress(chunk, asbytes=True)
        original = len(packed) >= len(chunk)
        body = chunk if original else packed
        header = len(body) << 1 | int(original)
        out += bytes((header & 0xFF, header >> 8 & 0xFF, header >> 16 & 0xFF)) + body
    return bytes(out)


def with_user_metadata(tail: bytes, items: dict[str, bytes], *, path: str) -> tuple[int, bytes]:
    """Given the last bytes of an ORC file (at least footer + postscript + 1), return (how many of those bytes to
    replace, counted from the end) and the replacement tail carrying the extra user metadata items.

    Raises:
        CorruptFileError: the tail is not an ORC postscript/footer this code understands.
    """
    if not tail:
        raise CorruptFileError(f"{path}: empty file")
    ps_length = tail[-1]
    if ps_length + 1 > len(tail):
        raise CorruptFileError(f"{path}: postscript length {ps_length} exceeds the file")
    postscript = parse_postscript(tail[-1 - ps_length:-1])
    if postscript.compression not in (NONE, ZLIB, SNAPPY):
        raise CorruptFileError(f"{path}: ORC compression kind {postscript.compression} is not supported here "
                               "(NONE, ZLIB or SNAPPY)")
    footer_end = len(tail) - 1 - ps_length
    footer_start = footer_end - postscript.footer_length
    if footer_start < 0:
        raise CorruptFileError(f"{path}: footer of {postscript.footer_length} bytes does not fit the tail read")
    footer = _decompress(tail[footer_start:footer_end], postscript.compression)
    for name, value in items.items():
        item = _length_delimited(1, name.encode("utf-8")) + _length_delimited(2, value)
        footer += _length_delimited(_FOOTER_METADATA, item)
    new_footer = _compress(footer, postscript.compression, postscript.block_size)
    fields = []
    for number, wire, value in _fields(postscript.raw):
        key = _varint(number << 3 | wire)
        if number == _FOOTER_LENGTH and wire == 0:
            fields.append(key + _varint(len(new_footer)))
        else:
            fields.append(key + value)  # raw encoding (a length-delimited value keeps its length prefix)
    new_postscript = b"".join(fields)
    if len(new_postscript) > 255:
        raise CorruptFileError(f"{path}: postscript would exceed 255 bytes")
    return len(tail) - footer_start, new_footer + new_postscript + bytes((len(new_postscript),))
