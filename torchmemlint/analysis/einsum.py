"""Einsum specs as label lists: ``"b h i d, b h j d -> b h i j"`` (einops: names separated
by spaces) or ``"bhid,bhjd->bhij"`` (torch: one letter each), ``...`` kept as one label."""

from __future__ import annotations

from typing import List, Optional, Tuple


def parse_spec(spec: str) -> Optional[Tuple[List[List[str]], List[str]]]:
    """``"b h i d, b h j d -> b h i j"`` / ``"bhid,bhjd->bhij"`` -> label lists (``...`` kept)."""
    if spec.count("->") != 1:
        return None
    inputs, output = spec.split("->")
    parsed = [_labels(part) for part in inputs.split(",")]
    out = _labels(output)
    if out is None or any(p is None for p in parsed):
        return None
    return parsed, out  # type: ignore[return-value]


def _labels(part: str) -> Optional[List[str]]:
    part = part.strip().replace("…", "...")
    if " " in part:  # einops: space-separated names
        labels = part.split()
    else:
        labels, rest = [], part
        while rest:
            if rest.startswith("..."):
                labels.append("...")
                rest = rest[3:]
            else:
                labels.append(rest[0])
                rest = rest[1:]
    if any(not (label == "..." or label.isidentifier()) for label in labels) or len(set(labels)) != len(labels):
        return None
    return labels
