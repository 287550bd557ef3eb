"""The frame format of a capture of delivered KCL records: what `bench._null_child --capture` appends and
`bench._capture` reads back.

One frame per delivered record, as kclpy hands it to the child: its sequence-number string and its `data`
already base64-decoded (`Record.binary_data`, the bytes `pipeline.decode.decode_record` is given). A frame
is the two, each prefixed with its length as a 4-byte big-endian unsigned integer. No separator is needed
and no byte of the record is altered.
"""

from __future__ import annotations

__all__ = ["CaptureFormatError", "frame", "read_frames"]

import struct

_LENGTH = struct.Struct(">I")


class CaptureFormatError(ValueError):
    """A capture that does not parse as whole frames (a truncated or foreign file)."""


def frame(sequence_number: str, data: bytes) -> bytes:
    """One record's frame."""
    number = sequence_number.encode("ascii")
    return _LENGTH.pack(len(number)) + number + _LENGTH.pack(len(data)) + data


def read_frames(blob: bytes) -> list[tuple[str, bytes]]:
    """Every (sequence number, data) of a capture, in the order they were delivered."""
    records: list[tuple[str, bytes]] = []
    view = memoryview(blob)
    at = 0
    while at < len(view):
        parts: list[bytes] = []
        for _ in range(2):
            if at + _LENGTH.size > len(view):
                raise CaptureFormatError("a frame's length is cut short")
            (length,) = _LENGTH.unpack_from(view, at)
            at += _LENGTH.size
            if at + length > len(view):
                raise CaptureFormatError("a frame's body is cut short")
            parts.append(bytes(view[at : at + length]))
            at += length
        records.append((parts[0].decode("ascii"), parts[1]))
    return records
