"""FrameReader: length-prefixed frames read with `readinto` (asyncio.BufferedProtocol), few copies.

    +----------------+---------------------------+
    | length: uint32 | payload: `length` bytes   |   (big-endian; see client/protocol/framing.py)
    +----------------+---------------------------+

The socket is read straight into memory this object owns (`get_buffer` / `buffer_updated`,
the BufferedProtocol pair), so no per-read `bytes` object exists:

- small frames are read into a fixed scratch buffer (`scratch_bytes`, 64 KiB by default) and
  copied out once as `bytes`;
- a frame larger than the scratch buffer gets its own `bytearray`, and the rest of it is read
  directly into that array (no further copy). Frames up to 8 MiB get their whole array at once
  (one allocation, no copies); larger ones start at 8 MiB and double as bytes arrive, so memory
  follows what the peer actually sent, not what its length prefix claims (at most 8 MiB per
  connection on a mere claim).

The length prefix is checked against `max_frame_bytes` before anything is allocated for it
(FrameTooLargeError), as FrameDecoder does. Payloads come out as `bytes` (small) or `bytearray`
(large); msgpack decodes both.

Owned by one connection on one event loop; not thread-safe.
"""

from __future__ import annotations

from client.protocol.framing import LENGTH, LENGTH_SIZE, FrameTooLargeError

_FIRST_CHUNK = 8 << 20  # first allocation for a large frame; doubles up to the frame's size


class FrameReader:
    __slots__ = ("_max", "_scratch", "_view", "_start", "_end", "_frame", "_size", "_filled")

    def __init__(self, max_frame_bytes: int, scratch_bytes: int = 64 * 1024) -> None:
        if scratch_bytes < 2 * LENGTH_SIZE:
            raise ValueError("scratch buffer too small")
        self._max = max_frame_bytes
        self._scratch = bytearray(scratch_bytes)
        self._view = memoryview(self._scratch)
        self._start = 0  # unparsed bytes are scratch[_start:_end]
        self._end = 0
        self._frame: bytearray | None = None  # a large frame being filled in place
        self._size = 0  # its full size
        self._filled = 0  # bytes of it received

    def get_buffer(self) -> memoryview:
        """Where the next socket read should land (never empty)."""
        frame = self._frame
        if frame is not None:
            if self._filled == len(frame):
                self._grow()
                frame = self._frame
                assert frame is not None
            return memoryview(frame)[self._filled :]
        if self._end == len(self._scratch):
            self._compact()
        return self._view[self._end :]

    def buffer_updated(self, nbytes: int) -> list[bytes | bytearray]:
        """`nbytes` landed in the last buffer; return the payloads now complete (maybe none).
        Raises FrameTooLargeError for a length prefix above the maximum."""
        if self._frame is not None:
            self._filled += nbytes
            if self._filled < self._size:
                return []
            out: list[bytes | bytearray] = [self._frame]
            self._frame = None
            return out
        self._end += nbytes
        return self._parse()

    @property
    def buffered(self) -> int:
        """Bytes received and not yet returned as payloads."""
        return (self._filled if self._frame is not None else 0) + self._end - self._start

    # -- internals -------------------------------------------------------------------------------

    def _parse(self) -> list[bytes | bytearray]:
        out: list[bytes | bytearray] = []
        scratch = self._scratch
        start, end = self._start, self._end
        while end - start >= LENGTH_SIZE:
            (size,) = LENGTH.unpack_from(scratch, start)
            if size > self._max:
                self._start, self._end = start, end
                raise FrameTooLargeError(
                    f"frame of {size} bytes exceeds socket.request.max.bytes={self._max}"
                )
            body = start + LENGTH_SIZE
            if end - body >= size:
                out.append(bytes(self._view[body : body + size]))
                start = body + size
                continue
            if LENGTH_SIZE + size > len(scratch):
                # Too big for the scratch buffer: give it its own array, read the rest in place.
                have = end - body
                cap = min(size, max(_FIRST_CHUNK, 2 * have))
                frame = bytearray(cap)
                frame[:have] = self._view[body:end]
                self._frame, self._size, self._filled = frame, size, have
                start = end = 0
            break
        if start == end:
            start = end = 0
        self._start, self._end = start, end
        return out

    def _compact(self) -> None:
        n = self._end - self._start
        self._scratch[:n] = bytes(self._view[self._start : self._end])  # overlap-safe
        self._start, self._end = 0, n

    def _grow(self) -> None:
        old = self._frame
        assert old is not None
        new = bytearray(min(self._size, 2 * len(old)))
        memoryview(new)[: self._filled] = memoryview(old)[: self._filled]
        self._frame = new
