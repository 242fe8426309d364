"""Progress of a profile on stderr: each stage (importing, building and measuring,
each finding's variant, each batch tried) as it starts, and how long it took.

Shown only when ``enable`` was called, which the CLI does when stderr is a
terminal (tqdm's status line); silent otherwise, and silent for the Python API.
Importing this module imports neither torch nor tqdm.
"""

from __future__ import annotations

import contextlib
import time
from typing import IO, Iterator, List, Optional

_display: Optional["_Display"] = None


class _Display:
    def __init__(self, stream: IO[str]) -> None:
        import tqdm

        tqdm.tqdm.monitor_interval = 0  # no monitor thread next to the user's code
        self.stream = stream
        self.bar = tqdm.tqdm(total=0, bar_format="torchmemlint: {desc}", file=stream, leave=False,
                             dynamic_ncols=True)
        self.stack: List[str] = []

    def begin(self, text: str) -> None:
        self.stack.append(text)
        self.bar.set_description_str("%s ..." % " / ".join(self.stack))

    def end(self, text: str, seconds: float, failed: bool) -> None:
        if self.stack:
            self.stack.pop()
        self.bar.write("torchmemlint: %s%s (%.1f s)" % (text, ": failed" if failed else "", seconds),
                       file=self.stream)
        self.bar.set_description_str("%s ..." % " / ".join(self.stack) if self.stack else "")

    def close(self) -> None:
        self.bar.close()


def enable(stream: IO[str]) -> None:
    """Show progress on ``stream`` (a terminal) until ``disable``."""
    global _display
    if _display is None:
        _display = _Display(stream)


def disable() -> None:
    global _display
    if _display is not None:
        _display.close()
        _display = None


@contextlib.contextmanager
def stage(text: str) -> Iterator[None]:
    """Mark a stage of the profile; with progress shown, it is named while it runs and
    its time printed when it ends."""
    if _display is None:
        yield
        return
    started = time.perf_counter()
    _display.begin(text)
    failed = True
    try:
        yield
        failed = False
    finally:
        if _display is not None:
            _display.end(text, time.perf_counter() - started, failed)


def is_enabled() -> bool:
    return _display is not None
