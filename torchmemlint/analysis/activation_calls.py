"""Activation calls as the value graph normalises them (``analysis/values.py``): which
functions and layers are activations, and for a call, the tensor it runs on and whether it
overwrites it."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import libcst as cst

from torchmemlint.analysis.syntax import argument, has_star_args, literal_bool
from torchmemlint.analysis.vocabulary import INPLACE_FUNCTIONS, INPLACE_METHODS, KIND_BY_FUNCTION, KIND_BY_MODULE, NN

ACTIVATION_FUNCTIONS = frozenset(n for n in (*KIND_BY_FUNCTION, *INPLACE_FUNCTIONS) if "dropout" not in n)
# the ``nn`` activation layers (those with an ``inplace`` switch and the others)
ACTIVATION_MODULES = frozenset(n for n in KIND_BY_MODULE if "Dropout" not in n) | frozenset(
    NN + n for n in ("ReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "LeakyReLU", "Mish", "ELU", "Hardswish")
)
ACTIVATION_METHODS = frozenset(INPLACE_METHODS)  # ``x.relu_()``: always in place


def activation_call(name: str, call: cst.Call) -> Optional[Tuple[cst.BaseExpression, Optional[bool]]]:
    """For ``F.leaky_relu(x, 0.1)``, ``F.relu(input=x, inplace=True)``, ``torch.sigmoid_(x)``
    (``name``: the qualified function): the expression it runs on and whether it overwrites it
    (None: not a literal). None for anything else."""
    if name not in ACTIVATION_FUNCTIONS:
        return None
    operand = argument(call, 0, "input")
    if operand is None:
        return None
    if name in INPLACE_FUNCTIONS:
        return operand.value, True
    params = KIND_BY_FUNCTION[name].functional_params
    given = argument(call, params.index("inplace") + 1 if "inplace" in params else None, "inplace")
    if has_star_args(call):
        return operand.value, None
    return operand.value, False if given is None else literal_bool(given.value)


def activation_value(graph: Any, name: str, call: cst.Call, positional: List[Any], keywords: Dict[str, Any]) -> Any:
    """The value graph's ``activation`` value for an activation function call (None for any
    other call): made from the tensor it runs on; ``info["inplace"]``: True, False or None (not
    a literal), ``info["operand"]``: the expression it runs on."""
    found = activation_call(name, call)
    if found is None:
        return None
    source = positional[0] if positional else keywords["input"]
    rest = [v for v in (*positional, *keywords.values()) if v is not source]
    return graph._same("activation", source, call, rest, qualified=name, inplace=found[1], operand=found[0])


def nested_calls(call: cst.Call, resolver, function: Optional[cst.FunctionDef] = None) -> List[cst.Call]:
    """The element constructors and nested Sequentials that ``call``'s flattening covers."""
    found: List[cst.Call] = []
    for arg in call.args:
        value = arg.value
        if arg.star or type(value) is not cst.Call:
            continue
        if resolver.constructor(value) == NN + "Sequential":
            found.append(value)
            found.extend(nested_calls(value, resolver, function))
        elif resolver.layer(value, function) is not None:
            found.append(value)
        elif resolver.qualify(value.func) == "collections.OrderedDict" and value.args:
            pairs = value.args[0].value
            for element in getattr(pairs, "elements", ()):
                pair = element.value
                if type(pair) is cst.Tuple and len(pair.elements) == 2:
                    inner = pair.elements[1].value
                    if type(inner) is cst.Call:
                        found.append(inner)
                        if resolver.constructor(inner) == NN + "Sequential":
                            found.extend(nested_calls(inner, resolver))
    return found
