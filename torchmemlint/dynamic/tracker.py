"""Dispatch-level tracking of live tensor memory.

``LiveTracker`` sees every storage that an aten op produces and forgets it
when its ``StorageImpl`` dies.  Freeing is decided by Python reference counts
and the autograd engine, which do not depend on the device, so the same
tracker run under ``FakeTensorMode`` on the cpu device reproduces the byte
counts of a real run without allocating anything
(``tests/dynamic/test_dynamic_tracker.py::test_fake_cpu_matches_real_cpu_to_the_byte``).
"""

from __future__ import annotations

import bisect
import weakref
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Tuple

import torch
from torch import nn
from torch.nn.modules import module as module_hooks
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

FORWARD = "forward"
BACKWARD = "backward"
# Bucket for forward allocations made outside any tracked module (the loss).
NO_MODULE = "(no module)"

CUDA_BLOCK_BYTES = 512


def round_up(nbytes: int, multiple: int) -> int:
    if multiple <= 1 or nbytes == 0:
        return nbytes
    return -(-nbytes // multiple) * multiple


@dataclass(frozen=True)
class MemoryEvent:
    """One allocation (``delta > 0``) or free (``delta < 0``) of a storage."""

    index: int
    storage_id: int
    delta: int
    op: str
    module: str
    phase: str


@dataclass
class _LiveStorage:
    storage_id: int
    nbytes: int
    op: str
    module: str
    phase: str


@dataclass
class _PeakInfo:
    bytes: int = 0
    phase: str = ""
    op: str = ""
    module: str = ""
    index: int = -1  # the event that reached it (-1: none since the window began)


@dataclass
class TrackerSnapshot:
    live_bytes: int
    by_module: Dict[str, int] = field(default_factory=dict)


class LiveTracker(TorchDispatchMode):
    """Counts the bytes of all live storages created by aten ops while active.

    Storages that existed before the tracker (parameters, the input batch)
    are not counted.  Views and in-place results share their input's storage
    and are not counted again.  ``round_to=512`` charges each storage the
    size of the CUDA caching allocator's smallest block multiple.

    The caller sets ``phase`` ("forward"/"backward"); ``track_modules(root)``
    attributes forward allocations to the innermost running submodule
    (backward ones go to a "backward" bucket).  ``keep_events=False`` drops
    the alloc/free stream, for long loops.
    """

    def __init__(self, round_to: int = 1, keep_events: bool = True, observer: Any = None) -> None:
        super().__init__()
        # Told of every allocation, resize, saved tensor and op (``lines.StepObserver``).
        self.observer = observer
        self.round_to = round_to
        self.keep_events = keep_events
        self.phase = FORWARD
        self.live_bytes = 0
        self.peak = _PeakInfo()
        self.phase_peaks: Dict[str, int] = {}
        self.events: List[MemoryEvent] = []
        self.allocated_by_module: Dict[str, int] = {}
        self._live: Dict[int, _LiveStorage] = {}
        self._saved: Dict[int, int] = {}
        self._next_storage_id = 0
        self._clock = 0
        self._module_names: Dict[int, str] = {}
        self._module_stack: List[str] = []
        self._hook_handles: List[Any] = []
        # Names of all aten ops dispatched, allocating or not.
        self.ops_seen: set = set()

    # -- module attribution -------------------------------------------------

    def track_modules(self, root: nn.Module) -> "LiveTracker":
        """Attribute allocations to ``root``'s submodules by qualified name."""
        # A module registered twice keeps its first name, as in named_modules().
        self._module_names = {
            id(mod): name or type(root).__name__ for name, mod in root.named_modules()
        }
        self._hook_handles = [
            module_hooks.register_module_forward_pre_hook(self._enter_module),
            module_hooks.register_module_forward_hook(self._leave_module, always_call=True),
        ]
        return self

    def _enter_module(self, mod: nn.Module, args: Any) -> None:
        name = self._module_names.get(id(mod))
        if name is not None:
            self._module_stack.append(name)

    def _leave_module(self, mod: nn.Module, args: Any, output: Any) -> None:
        name = self._module_names.get(id(mod))
        if name is not None and self._module_stack and self._module_stack[-1] == name:
            self._module_stack.pop()

    def _current_module(self) -> str:
        if self.phase == BACKWARD:
            return BACKWARD
        return self._module_stack[-1] if self._module_stack else NO_MODULE

    def remove_hooks(self) -> None:
        for handle in self._hook_handles:
            handle.remove()
        self._hook_handles = []
        self._module_stack = []

    # -- dispatch -----------------------------------------------------------

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        input_storages = {
            id(t.untyped_storage()) for t in _tensors(args, kwargs) if _has_storage(t)
        }
        op_name = func.overloadpacket.__name__
        self.ops_seen.add(op_name)
        for tensor, aliases_input in _outputs(func, out):
            if not _has_storage(tensor):
                continue
            storage = tensor.untyped_storage()
            key = id(storage)
            record = self._live.get(key)
            if record is not None:
                # resize_ and out= variants can grow an already counted storage.
                self._resize(record, storage.nbytes(), op_name)
            elif key not in input_storages and not aliases_input:
                # A view never allocates, even when fake tensors give it a storage of its
                # own (views of deep-copied or re-wrapped fake parameters do).
                self._allocate(storage, op_name)
        if self.observer is not None:
            self._observe("op", self, func, args, kwargs or {}, out)
        return out

    def _observe(self, event: str, *args: Any) -> None:
        """Tell the observer; its failure never fails the step (it stops observing)."""
        try:
            getattr(self.observer, event)(*args)
        except Exception as error:  # noqa: BLE001 - a bug in the observer is not the model's
            observer, self.observer = self.observer, None
            observer.failed = "%s: %s" % (type(error).__name__, error)

    def storage_key(self, tensor: torch.Tensor) -> Any:
        """The tracked storage id behind ``tensor``, or ``("x", id)`` for one made before
        the tracker (parameters, inputs); None without a single storage."""
        if not _has_storage(tensor):
            return None
        storage = tensor.untyped_storage()
        record = self._live.get(id(storage))
        return record.storage_id if record is not None else ("x", id(storage))

    def _allocate(self, storage: Any, op: str) -> None:
        key = id(storage)
        record = _LiveStorage(
            storage_id=self._next_storage_id,
            nbytes=round_up(storage.nbytes(), self.round_to),
            op=op,
            module=self._current_module(),
            phase=self.phase,
        )
        self._next_storage_id += 1
        self._live[key] = record
        if self.observer is not None:
            self._observe("allocated", record)
        weakref.finalize(storage, self._free, key)
        self.allocated_by_module[record.module] = (
            self.allocated_by_module.get(record.module, 0) + record.nbytes
        )
        self._change(record, record.nbytes, op)

    def _resize(self, record: _LiveStorage, raw_nbytes: int, op: str) -> None:
        nbytes = round_up(raw_nbytes, self.round_to)
        if nbytes == record.nbytes:
            return
        # Modelled as free + new allocation, which is what a resize does.
        self._change(record, -record.nbytes, op)
        record.nbytes = nbytes
        if self.observer is not None:
            self._observe("resized", record.storage_id, self._next_storage_id, nbytes)
        record.storage_id = self._next_storage_id
        self._next_storage_id += 1
        self._change(record, nbytes, op)

    def _free(self, key: int) -> None:
        record = self._live.pop(key, None)
        if record is not None:
            self._change(record, -record.nbytes, "free")

    def _change(self, record: _LiveStorage, delta: int, op: str) -> None:
        if delta == 0:
            return
        self.live_bytes += delta
        if self.keep_events:
            self.events.append(
                MemoryEvent(self._clock, record.storage_id, delta, op, record.module, self.phase)
            )
        self._clock += 1
        if delta > 0:
            if self.live_bytes > self.phase_peaks.get(self.phase, 0):
                self.phase_peaks[self.phase] = self.live_bytes
            if self.live_bytes > self.peak.bytes:
                self.peak = _PeakInfo(self.live_bytes, self.phase, op, record.module, self._clock - 1)

    # -- queries ------------------------------------------------------------

    def record_saved_tensors(self) -> Any:
        """Context manager: while active, note which tracked storages autograd
        packs for backward (``saved_bytes``).  Parameters and inputs are not
        tracked and so not counted; segments of a non-reentrant checkpoint
        install their own hooks and save nothing here.  Memory behaviour is
        unchanged: the hooks keep the very tensor autograd would keep."""

        def pack(tensor: torch.Tensor) -> torch.Tensor:
            if _has_storage(tensor):
                record = self._live.get(id(tensor.untyped_storage()))
                if record is not None:
                    self._saved[record.storage_id] = record.nbytes
                    if self.observer is not None:
                        self._observe("saved", record.storage_id)
            return tensor

        return torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor)

    @property
    def saved_ids(self) -> set:
        """Storage ids that autograd packed for backward while ``record_saved_tensors`` was on."""
        return set(self._saved)

    @property
    def saved_bytes(self) -> int:
        return sum(self._saved.values())

    def snapshot(self) -> TrackerSnapshot:
        by_module: Dict[str, int] = {}
        for record in self._live.values():
            by_module[record.module] = by_module.get(record.module, 0) + record.nbytes
        return TrackerSnapshot(self.live_bytes, by_module)

    def reset_peak(self) -> None:
        """Start a new peak window from the bytes live now (like CUDA's reset)."""
        self.peak = _PeakInfo(self.live_bytes, self.phase, "", "", self._clock - 1)
        self.phase_peaks = {}

    def __exit__(self, *exc: Any) -> Optional[bool]:
        self.remove_hooks()
        return super().__exit__(*exc)


def _tensors(*trees: Any) -> Iterable[torch.Tensor]:
    for tree in trees:
        leaves, _ = tree_flatten(tree)
        for leaf in leaves:
            if isinstance(leaf, torch.Tensor):
                yield leaf


_ALIASING: Dict[Any, Tuple[bool, ...]] = {}


def _aliasing_returns(func: Any) -> Tuple[bool, ...]:
    """Per return of ``func``'s schema: does it alias an input (views, in-place, out=)?"""
    flags = _ALIASING.get(func)
    if flags is None:
        try:
            flags = tuple(ret.alias_info is not None for ret in func._schema.returns)
        except AttributeError:  # not an OpOverload: count by storage only
            flags = ()
        _ALIASING[func] = flags
    return flags


def _outputs(func: Any, out: Any) -> Iterable[Tuple[torch.Tensor, bool]]:
    """The tensors ``func`` returned, each with whether its schema says it aliases an input."""
    flags = _aliasing_returns(func)
    if len(flags) > 1 and isinstance(out, (tuple, list)) and len(out) == len(flags):
        for value, aliases in zip(out, flags):
            for tensor in _tensors(value):
                yield tensor, aliases
        return
    aliases = len(flags) == 1 and flags[0]
    for tensor in _tensors(out):
        yield tensor, aliases


def _has_storage(tensor: torch.Tensor) -> bool:
    # Sparse and some wrapper subclasses have no single storage to count.
    return tensor.layout == torch.strided


def storage_bytes(tensors: Iterable[torch.Tensor], round_to: int = 1) -> int:
    """Bytes of the distinct storages behind ``tensors`` (shared ones once)."""
    seen: Dict[int, int] = {}
    for tensor in tensors:
        if tensor is None or not _has_storage(tensor):
            continue
        storage = tensor.untyped_storage()
        seen[id(storage)] = round_up(storage.nbytes(), round_to)
    return sum(seen.values())


# -- CUDA caching allocator model ----------------------------------------------

_MIB = 1024 * 1024
_SMALL_REQUEST = _MIB  # requests up to this size use the small pool
_SMALL_SEGMENT = 2 * _MIB
_MEDIUM_REQUEST = 10 * _MIB  # requests below this get a 20 MiB segment
_MEDIUM_SEGMENT = 20 * _MIB
_LARGE_ROUNDING = 2 * _MIB


@dataclass
class AllocatorEstimate:
    """Peaks of a *modelled* CUDA caching allocator (not measured on a GPU)."""

    max_allocated: int
    max_reserved: int
    segments: int


@dataclass
class _Block:
    address: int
    size: int
    small_pool: bool
    allocated: bool = False
    prev: Optional["_Block"] = None
    next: Optional["_Block"] = None

    def key(self) -> Tuple[int, int]:
        return (self.size, self.address)


class _CachingAllocatorModel:
    def __init__(self) -> None:
        # Free blocks per pool (True = small), sorted best-fit first.
        self.free: Dict[bool, List[Tuple[int, int, _Block]]] = {True: [], False: []}
        self.by_storage: Dict[int, _Block] = {}
        self.next_address = 0
        self.segments = 0
        self.allocated = 0
        self.reserved = 0
        self.max_allocated = 0

    def malloc(self, storage_id: int, nbytes: int) -> None:
        size = round_up(nbytes, CUDA_BLOCK_BYTES)
        small = size <= _SMALL_REQUEST
        pool = self.free[small]
        pos = bisect.bisect_left(pool, (size, -1))
        if pos < len(pool):
            block = pool.pop(pos)[2]
        else:
            block = self._new_segment(size, small)
        remainder = block.size - size
        splittable = remainder >= CUDA_BLOCK_BYTES if small else remainder > _SMALL_REQUEST
        if splittable:
            rest = _Block(block.address + size, remainder, small, prev=block, next=block.next)
            if block.next is not None:
                block.next.prev = rest
            block.next = rest
            block.size = size
            self._add_free(rest)
        block.allocated = True
        self.by_storage[storage_id] = block
        self.allocated += block.size
        self.max_allocated = max(self.max_allocated, self.allocated)

    def free_storage(self, storage_id: int) -> None:
        block = self.by_storage.pop(storage_id, None)
        if block is None:
            return
        self.allocated -= block.size
        block.allocated = False
        previous = block.prev
        if previous is not None and not previous.allocated:
            self._remove_free(previous)
            self._merge_next_into(previous)
            block = previous
        following = block.next
        if following is not None and not following.allocated:
            self._remove_free(following)
            self._merge_next_into(block)
        self._add_free(block)

    def _new_segment(self, size: int, small: bool) -> _Block:
        if small:
            segment_size = _SMALL_SEGMENT
        elif size < _MEDIUM_REQUEST:
            segment_size = _MEDIUM_SEGMENT
        else:
            segment_size = round_up(size, _LARGE_ROUNDING)
        block = _Block(self.next_address, segment_size, small)
        self.next_address += segment_size
        self.segments += 1
        self.reserved += segment_size
        return block

    @staticmethod
    def _merge_next_into(block: _Block) -> None:
        following = block.next
        block.size += following.size
        block.next = following.next
        if following.next is not None:
            following.next.prev = block

    def _add_free(self, block: _Block) -> None:
        bisect.insort(self.free[block.small_pool], (block.size, block.address, block))

    def _remove_free(self, block: _Block) -> None:
        pool = self.free[block.small_pool]
        del pool[bisect.bisect_left(pool, block.key())]


def simulate_cuda_caching_allocator(events: Iterable[MemoryEvent]) -> AllocatorEstimate:
    """Replay an alloc/free stream through a model of PyTorch's CUDA allocator.

    This is a MODEL of c10/cuda/CUDACachingAllocator.cpp with default
    settings, one stream, infinite device memory and no ``empty_cache``;
    it has not been validated on a GPU.  Modelled rules:

    * requests are rounded up to 512 B;
    * requests <= 1 MiB come from the small pool, whose segments are 2 MiB;
      requests below 10 MiB get 20 MiB segments, larger ones a segment
      rounded up to 2 MiB;
    * a free cached block is chosen best-fit (smallest size, then lowest
      address) from the request's pool; it is split only if the remainder
      is >= 512 B (small pool) or > 1 MiB (large pool), otherwise the whole
      block is charged, so an allocation can cost up to ~1 MiB extra;
    * freed blocks merge with free neighbours of the same segment; segments
      are never returned, so reserved memory only grows.

    Kernel workspaces (cuDNN, cuBLAS) are not in the event stream and so not
    in the estimate.  Events of storages allocated before the stream began
    are ignored.
    """
    model = _CachingAllocatorModel()
    for event in events:
        if event.delta > 0:
            model.malloc(event.storage_id, event.delta)
        elif event.delta < 0:
            model.free_storage(event.storage_id)
    return AllocatorEstimate(model.max_allocated, model.reserved, model.segments)
