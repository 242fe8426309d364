"""Worker processes that survive the death of one of them.

``run_isolated(function, items, extra, jobs, on_death)`` calls ``function(item, *extra)`` for
every item in up to ``jobs`` child processes and returns the results in order. A child that
dies while it holds an item (a native crash in a parser, a signal, the kernel's out-of-memory
killer) costs only that item: ``on_death(item, why)`` stands in for its result, a fresh child
takes the next item, and the other items are still done. ``ProcessPoolExecutor`` cannot do this:
one dead worker breaks the whole pool and every pending result with it.

Children are forked where the platform can (Linux): the parent has imported everything already,
so a child costs a few milliseconds, and even ``-j 1`` lints in one child, so that a crash
never takes the run down. Children ignore SIGINT; the parent turns Ctrl-C into
``KeyboardInterrupt``, stops the children and re-raises it.
"""

from __future__ import annotations

import multiprocessing
import signal
from multiprocessing.connection import Connection, wait
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple


def signal_name(exitcode: Optional[int]) -> str:
    """``killed by SIGSEGV`` / ``exited with status 3`` for a child's exit code."""
    if exitcode is not None and exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exited with status {exitcode}"


def _context() -> Any:
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else None)


def _serve(connection: Connection, function: Callable[..., Any], extra: Tuple) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides what Ctrl-C stops
    while True:
        try:
            message = connection.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        index, item = message
        connection.send((index, function(item, *extra)))


class _Worker:
    def __init__(self, context: Any, function: Callable[..., Any], extra: Tuple) -> None:
        parent_end, child_end = context.Pipe()
        self.connection = parent_end
        self.process = context.Process(
            target=_serve, args=(child_end, function, extra), daemon=True
        )
        self.process.start()
        child_end.close()
        self.holding: Optional[int] = None

    def stop(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join()
        self.connection.close()


def run_isolated(
    function: Callable[..., Any],
    items: Sequence[Any],
    extra: Tuple,
    jobs: int,
    on_death: Callable[[Any, str], Any],
) -> List[Any]:
    """``function(item, *extra)`` for every item, in order, over up to ``jobs`` children."""
    if not items:
        return []
    context = _context()
    results: Dict[int, Any] = {}
    queue = list(range(len(items)))
    queue.reverse()  # popped from the end: items in order
    workers: List[_Worker] = []
    try:
        for _ in range(max(1, min(jobs, len(items)))):
            workers.append(_Worker(context, function, extra))
        for worker in workers:
            _hand_out(worker, queue, items)
        while len(results) < len(items):
            busy = {w.connection: w for w in workers if w.holding is not None}
            sentinels = {w.process.sentinel: w for w in workers if w.holding is not None}
            ready = wait([*busy, *sentinels])
            for ready_object in ready:
                worker = busy.get(ready_object)  # type: ignore[call-overload]
                if worker is not None and worker.holding is not None:
                    try:
                        index, result = worker.connection.recv()
                    except (EOFError, OSError):
                        continue  # it died: its sentinel says so below
                    results[index] = result
                    worker.holding = None
                    _hand_out(worker, queue, items)
            for ready_object in ready:
                worker = sentinels.get(ready_object)  # type: ignore[call-overload]
                if worker is None or worker.holding is None or worker.process.is_alive():
                    continue
                if worker.connection.poll():  # it answered before it went
                    try:
                        index, result = worker.connection.recv()
                        results[index] = result
                        worker.holding = None
                    except (EOFError, OSError):
                        pass
                if worker.holding is not None:
                    worker.process.join()
                    held = worker.holding
                    results[held] = on_death(items[held], signal_name(worker.process.exitcode))
                worker.stop()
                workers.remove(worker)
                if queue:
                    replacement = _Worker(context, function, extra)
                    workers.append(replacement)
                    _hand_out(replacement, queue, items)
        return [results[index] for index in range(len(items))]
    finally:
        for worker in workers:
            try:
                worker.connection.send(None)
            except (OSError, ValueError):
                pass
            worker.stop()


def _hand_out(worker: _Worker, queue: List[int], items: Sequence[Any]) -> None:
    if queue:
        index = queue.pop()
        worker.holding = index
        worker.connection.send((index, items[index]))
