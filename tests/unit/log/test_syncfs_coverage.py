"""Which log dirs a flush round may cover with one syncfs: only those on a file system whose
syncfs makes every file's data durable (ext4, XFS, btrfs, f2fs), told from the mount table."""

from __future__ import annotations

from pathlib import Path

from broker.log.syncfs import SYNCFS_FILE_SYSTEMS, file_system_type

MOUNTINFO = """\
22 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw
40 22 0:35 / /data rw,relatime shared:20 - xfs /dev/vdb rw
41 40 0:36 / /data/fuse\\040dir rw,nosuid - fuse.lazyfs lazyfs rw,user_id=0
42 22 0:37 / /mnt/nfs rw - nfs4 server:/x rw
"""


def test_the_longest_mount_point_holding_the_path_gives_the_type() -> None:
    def fs(p: str) -> str | None:
        return file_system_type(Path(p), MOUNTINFO)

    assert fs("/") == "ext4"
    assert fs("/var/lib/gregor") == "ext4"
    assert fs("/data") == "xfs"
    assert fs("/data/logs/t-0") == "xfs"
    assert fs("/data/fuse dir/logs") == "fuse.lazyfs"  # (\040 in mountinfo is a space)
    assert fs("/datax") == "ext4"  # not inside /data
    assert fs("/mnt/nfs/logs") == "nfs4"


def test_only_local_file_systems_with_a_full_sync_fs_qualify() -> None:
    assert {"ext4", "xfs"} <= SYNCFS_FILE_SYSTEMS
    assert not {"fuse.lazyfs", "fuse", "nfs4", "nfs", "overlay", "tmpfs"} & SYNCFS_FILE_SYSTEMS


def test_no_mount_table_means_no_type() -> None:
    assert file_system_type(Path("/x"), "") is None
