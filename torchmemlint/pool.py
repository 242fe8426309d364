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

import gc
import multiprocessing
import signal
import sys
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


class _Failed:
    """What the child sends for an item whose function raised (not the child's death)."""

    def __init__(self, error: Exception) -> None:
        message = " ".join(str(error).split())[:200]
        self.why = f"stopped by {type(error).__name__}" + (f": {message}" if message else "")


# A child's objects that outlive an item (for the linter: the analyses of other project files it
# followed, the summaries, the caches) would be walked again by the cyclic garbage collector as
# they age through its generations, the oldest at every full collection. After each item a child
# collects the young generation (what the item left in cycles: it was allocated meanwhile) and
# moves what lives on into the collector's permanent generation, so that later collections only
# see what is new; once the objects in use have grown by ``_GROWTH_STEP`` since the last full
# collection, it collects everything once (a cycle closed later among older objects is still
# freed, and the work stays proportional to what was allocated).
_GROWTH_STEP = 1_000_000
_blocks_after_collection: Optional[int] = None  # (a child's first item: what it started with)


def between_items() -> None:
    global _blocks_after_collection
    gc.collect(0)  # the item's own cycles: everything allocated since the last call is young
    # (the growth is read from the allocator's count of blocks in use, which costs nothing;
    # ``gc.get_freeze_count()`` walks the whole frozen list)
    if _blocks_after_collection is None:
        _blocks_after_collection = sys.getallocatedblocks()
    if sys.getallocatedblocks() - _blocks_after_collection <= _GROWTH_STEP:
        gc.freeze()
        return
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    _blocks_after_collection = sys.getallocatedblocks()


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
        try:
            result = function(item, *extra)
        except Exception as error:  # reported for this item; the child goes on
            result = _Failed(error)
        between_items()
        try:
            connection.send((index, result))
        except (OSError, ValueError):
            return
        except Exception as error:  # a result that cannot be pickled
            connection.send((index, _Failed(error)))


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
        for worker in list(workers):
            _hand_out(worker, queue, items, workers, context, function, extra)
        while len(results) < len(items):
            if not any(w.holding is not None for w in workers):
                raise RuntimeError("no worker process could be started")
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
                    results[index] = _result(result, items[index], on_death)
                    worker.holding = None
                    _hand_out(worker, queue, items, workers, context, function, extra)
            for ready_object in ready:
                worker = sentinels.get(ready_object)  # type: ignore[call-overload]
                if worker is None or worker.holding is None or worker.process.is_alive():
                    continue
                if worker.connection.poll():  # it answered before it went
                    try:
                        index, result = worker.connection.recv()
                        results[index] = _result(result, items[index], on_death)
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
                    _hand_out(replacement, queue, items, workers, context, function, extra)
        return [results[index] for index in range(len(items))]
    finally:
        for worker in workers:
            try:
                worker.connection.send(None)
            except (OSError, ValueError):
                pass
            worker.stop()


def _result(result: Any, item: Any, on_death: Callable[[Any, str], Any]) -> Any:
    return on_death(item, result.why) if isinstance(result, _Failed) else result


def _hand_out(
    worker: _Worker,
    queue: List[int],
    items: Sequence[Any],
    workers: List[_Worker],
    context: Any,
    function: Callable[..., Any],
    extra: Tuple,
) -> None:
    """Give the worker the next item; one that died idle is replaced (once per item)."""
    if not queue:
        return
    index = queue.pop()
    for attempt in range(2):
        try:
            worker.connection.send((index, items[index]))
        except (OSError, ValueError):
            worker.stop()
            workers.remove(worker)
            if attempt:
                queue.append(index)
                return
            worker = _Worker(context, function, extra)
            workers.append(worker)
            continue
        worker.holding = index
        return
