"""The frames of a capture of delivered KCL records (`bench._capture_format`)."""

from __future__ import annotations

import pytest

from bench._capture_format import CaptureFormatError, frame, read_frames


def test_frames_read_back_as_the_records_written_in_their_order_with_their_bytes_unaltered() -> None:
    records = [
        ("110000000000000000001", b'{"a":1}\n'),
        ("110000000000000000002", b""),
        ("3", bytes(range(256))),
    ]
    assert read_frames(b"".join(frame(number, data) for number, data in records)) == records


def test_a_capture_cut_inside_a_frame_is_refused() -> None:
    blob = frame("110000000000000000001", b'{"eventName":"INSERT"}')
    with pytest.raises(CaptureFormatError):
        read_frames(blob[:-1])
