"""Reading an ingest body: content types, gzip, and a size limit counted after decompression."""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import AsyncIterator

from starlette.requests import ClientDisconnect

JSON_TYPES = {"application/json", "text/json"}
INFLATE_PIECE = 1024 * 1024
NDJSON_TYPES = {
    "application/x-ndjson",
    "application/ndjson",
    "application/jsonl",
    "application/x-jsonlines",
    "application/jsonlines",
}


class BodyError(Exception):
    """A body that cannot be read; carries the HTTP status to answer with."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def media_type(header: str | None) -> str:
    """The bare media type of a Content-Type header, lower-cased."""
    return (header or "").split(";", 1)[0].strip().lower()


def check_native_type(header: str | None) -> bool:
    """True for NDJSON, False for JSON; raises 415 for anything else."""
    kind = media_type(header)
    if kind in NDJSON_TYPES:
        return True
    if kind in JSON_TYPES:
        return False
    shown = kind or "none"
    raise BodyError(
        415,
        f"Content-Type {shown} is not supported here: send application/json "
        "(one object or an array) or application/x-ndjson (one object per line)",
    )


async def read_limited(
    chunks: AsyncIterator[bytes], encoding: str | None, limit: int, timeout: float | None = None
) -> bytes:
    """The whole body, decompressed; 413 once it passes `limit` bytes, 400 for broken gzip,
    408 when it takes longer than `timeout` seconds to arrive."""
    encoding = (encoding or "identity").strip().lower()
    if encoding not in ("identity", "gzip", "x-gzip"):
        raise BodyError(
            415, f"Content-Encoding {encoding} is not supported: send gzip or no encoding"
        )
    # One deadline for the whole body, not per chunk: a client trickling a byte a second would
    # otherwise hold its connection and its buffer for as long as it likes.
    try:
        async with asyncio.timeout(timeout):
            return await _read(chunks, encoding, limit)
    except TimeoutError:
        raise BodyError(
            408,
            f"the body did not arrive within {timeout:g} s; send it faster or in smaller "
            "batches (the limit is TOKENSHAPE_BODY_TIMEOUT_S)",
        ) from None
    except ClientDisconnect:
        raise BodyError(
            400, "the client disconnected before the body was complete; nothing was stored"
        ) from None


async def _read(chunks: AsyncIterator[bytes], encoding: str, limit: int) -> bytes:
    too_big = BodyError(
        413,
        f"the body is larger than {limit} bytes after decompression; "
        "send smaller batches (the limit is TOKENSHAPE_MAX_BODY_BYTES)",
    )
    out = bytearray()
    if encoding == "identity":
        async for chunk in chunks:
            out += chunk
            if len(out) > limit:
                raise too_big
        return bytes(out)
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    received = False
    async for chunk in chunks:
        if not chunk:
            continue
        received = True
        data = chunk
        while True:
            if inflate.eof:  # concatenated gzip members: start the next one
                data = inflate.unused_data + data if inflate.unused_data else data
                inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
            room = min(INFLATE_PIECE, limit + 1 - len(out))
            try:
                # max_length bounds memory: a bomb never inflates past the limit, and a piece
                # is at most INFLATE_PIECE, so a 16 MB body is not held twice while inflating.
                piece = inflate.decompress(data, room)
            except zlib.error as exc:
                raise BodyError(400, f"the gzip body is corrupt ({exc}); resend it") from None
            out += piece
            if len(out) > limit:
                raise too_big
            data = inflate.unconsumed_tail
            if inflate.eof and inflate.unused_data:
                data = inflate.unused_data
                inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
            # A full piece may leave output pending inside zlib even with no input left.
            if not data and (len(piece) < room or inflate.eof):
                break
    if received and not inflate.eof:
        raise BodyError(
            400, "the gzip stream is truncated (it ended before its end marker); resend it"
        )
    if not received:
        return b""
    return bytes(out)


def looks_like_gzip(body: bytes) -> bool:
    """True when a body starts with gzip's magic bytes (1f 8b): sent without Content-Encoding."""
    return body[:2] == b"\x1f\x8b"


GZIP_HINT = "the body looks like gzip (starts with 1f 8b): set Content-Encoding: gzip"
