"""``profile --snapshot FILE``: the step's memory as a snapshot in the format of
``torch.cuda.memory._snapshot()``, which PyTorch's memory_viz (pytorch.org/memory_viz,
``python -m torch.cuda._memory_viz``) reads.

It is built from the tracker's alloc/free events replayed through the model of CUDA's
caching allocator (``tracker.simulate_cuda_caching_allocator``): addresses, segments and
blocks are the model's, not a GPU's, and only the step's own storages are in it (the
parameters, buffers and input batch that exist before the step are not).  Each
allocation's frame names the module and op that made it.
"""

from __future__ import annotations

import pickle
from typing import Any, Dict, List

from .tracker import _CachingAllocatorModel, _SMALL_REQUEST, round_up, CUDA_BLOCK_BYTES


class _RecordingAllocator(_CachingAllocatorModel):
    """The allocator model, keeping each segment's first block and size."""

    def __init__(self) -> None:
        super().__init__()
        self.heads: List[Any] = []
        self.trace: List[Dict[str, Any]] = []
        self.time = 0

    def _new_segment(self, size: int, small: bool) -> Any:
        block = super()._new_segment(size, small)
        self.heads.append(block)
        self.trace.append({"action": "segment_alloc", "addr": block.address, "size": block.size,
                           "stream": 0, "frames": [], "time_us": self.time})
        return block


def _frames(module: str, op: str, phase: str) -> List[Dict[str, Any]]:
    return [{"filename": module or "(no module)", "line": 0, "name": "%s (%s)" % (op, phase)}]


def build_snapshot(events: List[Any]) -> Dict[str, Any]:
    """The snapshot dict (``segments``, ``device_traces``) of an alloc/free stream."""
    model = _RecordingAllocator()
    live: Dict[int, Dict[str, Any]] = {}
    for event in events:
        model.time = event.index
        if event.delta > 0:
            model.malloc(event.storage_id, event.delta)
            block = model.by_storage[event.storage_id]
            entry = {"action": "alloc", "addr": block.address, "size": block.size, "stream": 0,
                     "frames": _frames(event.module, event.op, event.phase), "time_us": event.index}
            model.trace.append(entry)
            live[event.storage_id] = dict(entry, requested_size=round_up(event.delta, CUDA_BLOCK_BYTES))
        elif event.delta < 0 and event.storage_id in model.by_storage:
            allocation = live.pop(event.storage_id)
            for action in ("free_requested", "free_completed"):
                model.trace.append({"action": action, "addr": allocation["addr"], "size": allocation["size"],
                                    "stream": 0, "frames": allocation["frames"], "time_us": event.index})
            model.free_storage(event.storage_id)
    by_address = {item["addr"]: item for item in live.values()}
    segments = []
    for head in model.heads:
        blocks, total, allocated, block = [], 0, 0, head
        while block is not None:
            if block.allocated:
                item = by_address.get(block.address, {})
                blocks.append({"address": block.address, "size": block.size, "state": "active_allocated",
                               "requested_size": item.get("requested_size", block.size),
                               "frames": item.get("frames", [])})
                allocated += block.size
            else:
                blocks.append({"address": block.address, "size": block.size, "state": "inactive",
                               "requested_size": 0, "frames": []})
            total += block.size
            block = block.next
        segments.append({
            "device": 0, "address": head.address, "total_size": total, "allocated_size": allocated,
            "active_size": allocated, "requested_size": allocated, "stream": 0,
            "segment_type": "small" if head.small_pool or total <= _SMALL_REQUEST else "large",
            "segment_pool_id": (0, 0), "is_expandable": False, "frames": [], "blocks": blocks,
        })
    return {"segments": segments, "device_traces": [model.trace]}


def write_snapshot(result: Any, path: str) -> None:
    """Pickle the snapshot of ``result``'s step (a ``verify.ProfileResult``) to ``path``."""
    with open(path, "wb") as handle:
        pickle.dump(build_snapshot(result.report.events), handle)
