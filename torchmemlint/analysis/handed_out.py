"""Is a value of an attention's chain only handed out, never computed with? ``return out,
scores``, ``self.kept = scores.detach()``, and whisper's ``return (w @ v)..., qk.detach()`` whose
caller unpacks the pair and returns the scores on (``wv, qk = self.qkv_attention(q, k, v, mask)``
... ``return self.out(wv), qk``). Asked by the eager-attention question (``attention.py``): the
scores handed out so leave a site without a fix (SDPA never makes them), not no site."""

from __future__ import annotations

from typing import Any, Optional


def handed_out(graph: Any, value: Any, depth: int, part: Optional[Any] = None) -> bool:
    """Is ``value`` (of ``graph``, a ``FunctionValues``) a tuple or list holding a value
    (``part``), or that value detached, cloned, cast or unpacked, and only returned or stored?"""
    if value.op not in ("tuple", "same", "cast", "element") or depth == 0:
        return False
    consumers = graph.consumers(value)
    return bool(consumers) and all(
        c in ("return", "store") if isinstance(c, str)
        else _unpacked(graph, value, part, c, depth - 1) if value.op == "tuple" and c.op == "helper"
        else handed_out(graph, c, depth - 1, value) for c in consumers
    )


def _unpacked(graph: Any, returned: Any, part: Optional[Any], result: Any, depth: int) -> bool:
    """``returned``, the tuple a helper returns (``result``: its call, inlined in the caller),
    unpacked by the caller: the names taken from ``part``'s place are only handed out; the
    others hold other values."""
    places = {i for i, e in enumerate(returned.info.get("elements") or ()) if e is part}
    if not places or result.info.get("helper") is not returned.function or result.function is returned.function:
        return False
    readers = graph.consumers(result)
    return bool(readers) and all(
        c == "return" if isinstance(c, str)
        else c.op == "element" and (c.info.get("index") not in places or handed_out(graph, c, depth))
        for c in readers
    )
