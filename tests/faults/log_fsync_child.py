"""Child for test_log_fsync_error.py, run under `strace -e inject=fdatasync:error=EIO:when=N+`.

Appends one batch at a time to topic "io" partition 0 and asks the Flusher to fsync, printing
`flushed <offset>` for each report. When fdatasync starts failing, the flusher marks the log
dir offline: the next append raises StorageError and the child prints `offline <dir>` and
`end <end_offset> readable <n_batches>` (reads of the offline log still work), then exits 0.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from log_crash_child import make_batch

from broker.log import LogConfig, LogManager
from client.errors import StorageError
from client.records.header import iter_headers


def main() -> None:
    root = Path(sys.argv[1])
    mgr = LogManager([root], LogConfig())
    reported = threading.Condition()
    last = [-1]

    def on_flushed(topic: str, partition: int, offset: int) -> None:
        with reported:
            last[0] = offset
            print(f"flushed {offset}", flush=True)
            reported.notify_all()

    mgr.start_flushers(on_flushed)
    log = mgr.get_or_create("io", 0)
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline:
            info = log.append_as_leader(make_batch([b"payload"] * 3), 1)
            mgr.request_flush(log)
            target = info.last_offset
            with reported:  # wait for this append's fsync or for the dir to go offline
                step_deadline = time.monotonic() + 5
                while last[0] <= target and not log.offline and time.monotonic() < step_deadline:
                    reported.wait(0.01)  # a failed flush goes offline without a report
    except StorageError:
        print(f"offline {[str(d) for d in mgr.offline_dirs()]}", flush=True)
        data = log.read(0, 1 << 30).data
        print(
            f"end {log.end_offset} readable {len(list(iter_headers(data, check_crc=True)))}",
            flush=True,
        )
        mgr.close()
        return
    print("never failed", flush=True)
    sys.exit(1)


if __name__ == "__main__":
    main()
