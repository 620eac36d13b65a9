"""A process's wall clock set apart from the machine's, for tests of clock skew between nodes.

libfaketime (Debian's `faketime` package, which scripts/install-test-deps installs) is preloaded
into the process; it reads its offset ("+2h", "-30m", ...) from a file, again at most a second
after the file changes, so a test can move a running node's clock. Only the wall clock moves
(CLOCK_REALTIME: timestamps, what Kafka's `System.currentTimeMillis` and Rust's `SystemTime`
read); the monotonic clock every timeout runs on is left alone (FAKETIME_DONT_FAKE_MONOTONIC).

    clock = FakeClock(tmp_path / "clock-2", "+0")
    broker.env.update(clock.env())   # before broker.start()
    ...
    clock.set("+2h")
"""

from __future__ import annotations

import glob
from pathlib import Path


def libfaketime() -> str:
    """The path of libfaketime; a missing library fails the test (never a skip)."""
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1"))
    assert found, "libfaketime not found: install Debian's faketime package (scripts/install-test-deps does)"
    return found[0]


class FakeClock:
    def __init__(self, path: Path, offset: str = "+0"):
        self.path = Path(path)
        self.set(offset)

    def set(self, offset: str) -> None:
        """Moves the clock to `offset` from the machine's (libfaketime's syntax: "+2h", "-90m")."""
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(offset + "\n")
        tmp.replace(self.path)

    def env(self) -> dict[str, str]:
        return {
            "LD_PRELOAD": libfaketime(),
            "FAKETIME_TIMESTAMP_FILE": str(self.path),
            "FAKETIME_CACHE_DURATION": "1",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        }
