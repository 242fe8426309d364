"""Is a class built only behind a flag that is off unless a caller turns it on?

Guided diffusion's ``AttentionBlock`` builds ``QKVAttention`` only ``if
use_new_attention_order:``, a parameter defaulting to ``False`` that the model passes on from
its own ``False`` default: by default the class is never built, so its methods never run.
True when the class's file builds it at least once, every construction lies in an arm that
runs only behind such a flag and no construction in another file may turn it on
(``flags.strict_flag_test``), the file names the class nowhere else (not
handed on by name, not subclassed), and no other file of the project may name it (``ProjectLinks.may_name``).
"""

from __future__ import annotations

from typing import Any, Dict

import libcst as cst

from torchmemlint.tree import node_index


def built_only_behind_flags(analysis: Any, classdef: cst.ClassDef, memo: Dict[int, bool]) -> bool:
    key = id(classdef)
    if key not in memo:
        memo[key] = _behind_flags(analysis, classdef)
    return memo[key]


def _behind_flags(analysis: Any, classdef: cst.ClassDef) -> bool:
    from torchmemlint.analysis.flags import strict_flag_test  # flags reads the factories, which read the value graph's users

    name = classdef.name.value
    index = node_index(analysis.module)
    order = index.order
    constructions = []
    for here in index.positions(cst.Name):
        node = order[here]
        if node.value != name or node is classdef.name:  # type: ignore[attr-defined]
            continue
        parent = order[index.parent[here]] if index.parent[here] >= 0 else None
        call = parent if type(parent) is cst.Call and parent.func is node else None
        function = index.function_of(here)
        if call is None or function < 0:
            return False  # named otherwise: handed on, subclassed, built at module level
        constructions.append((call, order[function]))
    if not constructions or not all(strict_flag_test(analysis.values(function), call) is not None for call, function in constructions):
        return False
    links = analysis.links
    return links is None or not links.may_name(name)  # (asked last: it reads the importing files)
