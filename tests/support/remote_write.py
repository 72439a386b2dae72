"""A Prometheus remote-write receiver on 127.0.0.1 for the agent tests: it decodes each request
(snappy block format, then the WriteRequest protobuf of prometheus/prompb/remote.proto: repeated
TimeSeries {repeated Label {name, value}, repeated Sample {value, timestamp}}) into label sets, so a
test can see which series a real Prometheus agent sent and with which labels. Standard library
only: the two formats' decoders are small, and no snappy or protobuf package is needed."""
from __future__ import annotations

import struct
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from typing import Iterator

from tests.support.prometheus import serving


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def snappy_decompress(data: bytes) -> bytes:
    """Snappy's block format (github.com/google/snappy format_description.txt): the uncompressed
    length, then literals and back-references."""
    length, pos = _varint(data, 0)
    out = bytearray()
    while pos < len(data):
        tag = data[pos]
        pos += 1
        kind = tag & 3
        if kind == 0:                                  # literal
            size = tag >> 2
            if size >= 60:
                extra = size - 59
                size = int.from_bytes(data[pos:pos + extra], "little")
                pos += extra
            size += 1
            out += data[pos:pos + size]
            pos += size
            continue
        if kind == 1:                                  # copy, 1-byte offset
            size, offset = 4 + ((tag >> 2) & 7), ((tag >> 5) << 8) | data[pos]
            pos += 1
        elif kind == 2:                                # copy, 2-byte offset
            size, offset = (tag >> 2) + 1, int.from_bytes(data[pos:pos + 2], "little")
            pos += 2
        else:                                          # copy, 4-byte offset
            size, offset = (tag >> 2) + 1, int.from_bytes(data[pos:pos + 4], "little")
            pos += 4
        for _ in range(size):                          # byte by byte: a copy may overlap itself
            out.append(out[-offset])
    if len(out) != length:
        raise ValueError(f"snappy: {len(out)} bytes, header says {length}")
    return bytes(out)


def _fields(data: bytes) -> Iterator[tuple[int, object]]:
    """(field number, value) of a protobuf message: varints as ints, length-delimited as bytes."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 1:
            value, pos = struct.unpack("<d", data[pos:pos + 8])[0], pos + 8
        elif wire == 2:
            size, pos = _varint(data, pos)
            value, pos = data[pos:pos + size], pos + size
        elif wire == 5:
            value, pos = data[pos:pos + 4], pos + 4
        else:
            raise ValueError(f"protobuf wire type {wire}")
        yield number, value


def series(write_request: bytes) -> list[dict[str, str]]:
    """The label set of every TimeSeries of a WriteRequest."""
    out = []
    for number, ts in _fields(write_request):
        if number != 1:
            continue
        labels = {}
        for field, label in _fields(ts):
            if field == 1:
                parts = dict(_fields(label))
                labels[parts[1].decode()] = parts.get(2, b"").decode()
        out.append(labels)
    return out


class Receiver:
    """What arrived: each request's path and headers, and the label sets of its series."""

    def __init__(self):
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.series: list[dict[str, str]] = []
        self.lock = threading.Lock()


@contextmanager
def remote_write_receiver() -> Iterator[tuple[int, Receiver]]:
    received = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            decoded = series(snappy_decompress(body))
            with received.lock:
                received.requests.append((self.path, dict(self.headers)))
                received.series.extend(decoded)
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    with serving(Handler) as port:
        yield port, received
