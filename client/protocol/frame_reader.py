"""FrameReader: length-prefixed frames read with `readinto` (asyncio.BufferedProtocol), few copies.

    +----------------+---------------------------+
    | length: uint32 | payload: `length` bytes   |   (big-endian; see client/protocol/framing.py)
    +----------------+---------------------------+

The socket is read straight into memory this object owns (`get_buffer` / `buffer_updated`,
the BufferedProtocol pair), so no per-read `bytes` object exists:

- small frames are read into a fixed scratch buffer (`scratch_bytes`, 64 KiB by default) and
  copied out once as `bytes`;
- a frame larger than the scratch buffer stays in it while it has room; once the scratch
  buffer is full of that frame, the frame gets its own `bytearray`, twice the bytes that have
  arrived (received, plus those the caller says wait in the socket), replaced the same way
  each time it fills, up to the frame's size; the rest is read directly into it. So memory
  follows what the peer actually sent, never what its length prefix claims: a prefix claiming
  50 MiB followed by a few bytes costs nothing beyond the scratch buffer, and a frame's array
  is at most twice the bytes that arrived. A frame that arrives whole still ends as one
  `bytearray` of exactly its size (the zero-copy produce path).

Growth is explicit so that a caller can budget it (the broker's MemoryPool): `room_needed()`
says how many bytes the next growth allocates (0: `get_buffer` has room), `grow()` does it,
`reserved` is the frame array's current size. A caller that budgets nothing may just call
`get_buffer`, which grows by itself when it must.

The length prefix is checked against `max_frame_bytes` before anything is allocated for it
(FrameTooLargeError), as FrameDecoder does. Payloads come out as `bytes` (small) or `bytearray`
(large); msgpack decodes both.

Owned by one connection on one event loop; not thread-safe.
"""

from __future__ import annotations

import fcntl
import struct
import termios

from client.protocol.framing import LENGTH, LENGTH_SIZE, FrameTooLargeError


def socket_queued_bytes(fd: int) -> int:
    """Bytes waiting in socket `fd`'s receive queue (FIONREAD): they have arrived, so a frame's
    array may be sized to take them in one read. 0 when unknown (fd < 0, or the ioctl fails)."""
    if fd < 0:
        return 0
    try:
        queued: int = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
        return queued
    except OSError:
        return 0


class FrameReader:
    __slots__ = (
        "_max",
        "_limit_name",
        "_scratch",
        "_view",
        "_start",
        "_end",
        "_frame",
        "_size",
        "_filled",
    )

    def __init__(self, max_frame_bytes: int, scratch_bytes: int = 64 * 1024) -> None:
        if scratch_bytes < 2 * LENGTH_SIZE:
            raise ValueError("scratch buffer too small")
        self._max = max_frame_bytes
        self._limit_name = "socket.request.max.bytes"
        self._scratch = bytearray(scratch_bytes)
        self._view = memoryview(self._scratch)
        self._start = 0  # unparsed bytes are scratch[_start:_end]
        self._end = 0
        self._frame: bytearray | None = None  # a large frame being filled in place
        self._size = 0  # the size of the large frame (in its array or still in the scratch)
        self._filled = 0  # bytes of it in its array

    def get_buffer(self) -> memoryview:
        """Where the next socket read should land (never empty; grows when it must)."""
        if self.room_needed():
            self.grow()
        frame = self._frame
        if frame is not None:
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
            self._size = self._filled = 0
            return out
        self._end += nbytes
        return self._parse()

    def room_needed(self, queued: int = 0) -> int:
        """Bytes the next `grow(queued)` would allocate; 0 while `get_buffer` has room without
        it. The new array is twice the bytes that have arrived: those received, plus `queued`,
        the bytes known to be waiting in the socket (FIONREAD) (so a frame arriving fast is
        usually moved once, into an array of its full size)."""
        frame = self._frame
        if frame is not None:
            if self._filled < len(frame):
                return 0
            return min(self._size, 2 * (self._filled + queued)) - len(frame)
        if self._end < len(self._scratch) or self._start > 0:
            return 0  # room left, or compacting the scratch buffer makes some
        # The scratch buffer is full of the start of one frame too large for it.
        assert self._size > 0, "full scratch buffer without a large frame"
        have = self._end - LENGTH_SIZE
        return min(self._size, 2 * (have + queued))

    def grow(self, queued: int = 0) -> None:
        """Allocate the `room_needed(queued)` bytes: move a large frame out of the scratch
        buffer into its own array, or replace its full array by a larger one (never beyond the
        frame's size). Copies what arrived so far once."""
        need = self.room_needed(queued)
        if not need:
            return
        old = self._frame
        if old is None:
            have = self._end - LENGTH_SIZE
            new = bytearray(need)
            new[:have] = self._view[LENGTH_SIZE : self._end]
            self._filled = have
            self._start = self._end = 0
        else:
            new = bytearray(len(old) + need)
            memoryview(new)[: self._filled] = memoryview(old)[: self._filled]
        self._frame = new

    @property
    def reserved(self) -> int:
        """Bytes of the large frame's own array (0 when there is none): what `grow()` allocated
        for the frame being received. Handed over with the payload when the frame completes."""
        return len(self._frame) if self._frame is not None else 0

    @property
    def buffered(self) -> int:
        """Bytes received and not yet returned as payloads (after `buffer_updated`, the bytes of
        one partly received frame)."""
        return (self._filled if self._frame is not None else 0) + self._end - self._start

    def set_limit(self, max_frame_bytes: int, name: str) -> None:
        """From the next frame header on, refuse frames above `max_frame_bytes` (the key
        `name` in the error): e.g. sasl.server.max.receive.size until a client authenticated."""
        self._max = max_frame_bytes
        self._limit_name = name

    # -- internals -------------------------------------------------------------------------------

    def _parse(self) -> list[bytes | bytearray]:
        out: list[bytes | bytearray] = []
        scratch = self._scratch
        start, end = self._start, self._end
        self._size = 0
        while end - start >= LENGTH_SIZE:
            (size,) = LENGTH.unpack_from(scratch, start)
            if size > self._max:
                self._start, self._end = start, end
                raise FrameTooLargeError(
                    f"frame of {size} bytes exceeds {self._limit_name}={self._max}"
                )
            body = start + LENGTH_SIZE
            if end - body >= size:
                out.append(bytes(self._view[body : body + size]))
                start = body + size
                continue
            if LENGTH_SIZE + size > len(scratch):
                # Too big for the scratch buffer: it stays there (moved to the front) until the
                # buffer is full of it, then `grow()` gives it its own array.
                self._size = size
                if start > 0:
                    n = end - start
                    scratch[:n] = bytes(self._view[start:end])  # overlap-safe
                    start, end = 0, n
            break
        if start == end:
            start = end = 0
        self._start, self._end = start, end
        return out

    def _compact(self) -> None:
        n = self._end - self._start
        self._scratch[:n] = bytes(self._view[self._start : self._end])  # overlap-safe
        self._start, self._end = 0, n
