"""The classes of a file that share a class's instances' attributes: the class itself, the
bases of the file it derives from and the classes of the file deriving from it.

A method reads ``self.<x>`` that another class of its lineage binds: a base class's
``predict`` calling ``self.neural_network(x)``, which only its subclasses assign
(``ChemistryEmulator.__init__``: ``self.neural_network = NeuralNet(...)``), or a subclass's
method reading what the base's ``__init__`` built. What ``self.<x>`` may hold is what any of
them assigns (``module_calls.module_attribute``, tests/test_tml501_inherited_attributes.py).
"""

from __future__ import annotations

from typing import Any, Dict, List

from torchmemlint.analysis.names import dotted_name

_DEPTH = 8  # classes followed up or down, at most


def lineage(walk: Any, owner: Any) -> List[Any]:
    """``owner`` (a ``ClassFacts`` of ``walk``) first, then its ancestors and descendants
    among the file's classes (each once; found once per class and walk)."""
    known = walk.__dict__.setdefault("_lineages", {})
    if id(owner) not in known:
        classes: Dict[str, Any] = {}
        for facts in walk.classes:
            classes.setdefault(facts.node.name.value, facts)
        found: Dict[int, Any] = {id(owner): owner}
        _ancestors(owner, classes, found, 0)
        _descendants(owner, walk.classes, found, 0)
        known[id(owner)] = list(found.values())
    return known[id(owner)]


def _base_names(facts: Any) -> List[str]:
    return [dotted_name(arg.value) or "" for arg in facts.node.bases if arg.keyword is None]


def _ancestors(facts: Any, classes: Dict[str, Any], found: Dict[int, Any], depth: int) -> None:
    if depth > _DEPTH:
        return
    for name in _base_names(facts):
        base = classes.get(name)
        if base is not None and id(base) not in found:
            found[id(base)] = base
            _ancestors(base, classes, found, depth + 1)


def _descendants(facts: Any, every: List[Any], found: Dict[int, Any], depth: int) -> None:
    if depth > _DEPTH:
        return
    name = facts.node.name.value
    for other in every:
        if id(other) not in found and name in _base_names(other):
            found[id(other)] = other
            _descendants(other, every, found, depth + 1)
