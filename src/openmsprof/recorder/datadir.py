"""The writers of one raw data directory (``host/data`` or ``device_{id}/data``): its string
table and one slice series per source, all opened relative to the directory's fd."""

from __future__ import annotations

import os
from pathlib import Path

from openmsprof.fileio import fs
from openmsprof.recorder.rawfile import SliceWriter, StringTable
from openmsprof.recorder.records import RECORDS_MAGIC

__all__ = ["DataDir"]


class DataDir:
    """Writers of one ``.../data`` directory: a string table and one slice series per source."""

    def __init__(self, path: Path, dev: str) -> None:
        self.path, self.dev = path, dev
        #: every slice is created relative to this fd (O_NOFOLLOW): a data dir swapped for a
        #: symlink mid-run cannot redirect the writes
        self.dir_fd = fs.open_dir_fd(path)
        self.strings = StringTable(path, dev, self.dir_fd)
        self.channels: dict[str, SliceWriter] = {}
        self.pending: dict[str, bytearray] = {}

    def out(self, source: str) -> bytearray:
        buf = self.pending.get(source)
        if buf is None:
            buf = self.pending[source] = bytearray()
        return buf

    def write_records(self, source: str, data: bytes | memoryview) -> int:
        """Write ``data`` (whole records) to ``source`` now; the caller flushed the strings."""
        ch = self.channels.get(source)
        if ch is None:
            ch = self.channels[source] = SliceWriter(self.path, source, "records", self.dev,
                                                     RECORDS_MAGIC, dir_fd=self.dir_fd)
        return ch.write(data)

    def flush(self) -> int:
        written = self.strings.flush()
        for source, data in self.pending.items():
            if data:
                ch = self.channels.get(source)
                if ch is None:
                    ch = self.channels[source] = SliceWriter(self.path, source, "records", self.dev,
                                                             RECORDS_MAGIC, dir_fd=self.dir_fd)
                written += ch.write(data)
                data.clear()
        return written

    def close(self) -> None:
        try:
            self.flush()
            self.strings.close()
            for ch in self.channels.values():
                ch.close()
        finally:
            if self.dir_fd >= 0:
                os.close(self.dir_fd)
                self.dir_fd = -1

    def abandon(self) -> None:
        """In a forked child: close this process's copies of the parent's files, writing
        nothing (what is pending here is the parent's, and the parent writes it)."""
        self.pending.clear()
        self.strings.pending = bytearray()
        for w in [self.strings.writer, *self.channels.values()]:
            if w.fd >= 0:
                os.close(w.fd)
                w.fd = -1
        if self.dir_fd >= 0:
            os.close(self.dir_fd)
            self.dir_fd = -1
