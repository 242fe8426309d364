"""Which model a call of an item of a container runs (``self.mod_model[k](x)``, ``models[i](x)``,
monk's ``self.system_dict["local"]["model"](inputs)``), in a function named for evaluation:
TML501 judges it as a call of that model (``rules/loops.py``)."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchmemlint.analysis.autograd import CallEvent, MODEL_NAME
from torchmemlint.analysis.names import dotted_name
from torchmemlint.analysis.training import ScopeFacts, is_eval_name


def held_model(facts: ScopeFacts, event: CallEvent) -> Optional[str]:
    """``self.mod_model[k](x)``, ``models[i](x)``: an item of a container named as the model's,
    called in a function named for evaluation: ``"self.mod_model[...]"``; also an item a
    string key names as a model (``self.system_dict["local"]["model"](inputs)``, shown as the
    code writes it), and in any function an item it put in evaluation mode first
    (``self.SEEDER_LIST[index].eval()``); None otherwise."""
    func = event.node.func
    if event.func is not None or type(func) is not cst.Subscript:
        return None
    if _switched_before(facts, event, func):
        return facts.walk.module.code_for_node(func)  # ``self.SEEDER_LIST[index].eval()`` first: that item is a module
    if not is_eval_name(facts.scope.name):
        return None
    key = func.slice[0].slice if len(func.slice) == 1 and type(func.slice[0].slice) is cst.Index else None
    text = key.value.evaluated_value if key is not None and type(key.value) is cst.SimpleString else None
    if isinstance(text, str) and MODEL_NAME.match(text) and _calls_torch(facts):
        return facts.walk.module.code_for_node(func)
    base = dotted_name(func.value)
    return f"{base}[...]" if base is not None and facts.is_model(base) else None


def _switched_before(facts: ScopeFacts, event: CallEvent, item: cst.Subscript) -> bool:
    """The function put this very item in evaluation mode before the call (``models[i].eval()``;
    the same code, compared node by node)."""
    return any(
        call.attr == "eval" and call.seq < event.seq and type(call.receiver) is cst.Subscript and call.receiver.deep_equals(item)
        for call in facts.scope.calls
    )


def _calls_torch(facts: ScopeFacts) -> bool:
    """The function calls torch itself (``torch.max(outputs, 1)``) or a tensor's ``.cpu()`` /
    ``.cuda()`` (MXNet's arrays have neither): a model it holds by a key is torch's, not MXNet's
    (monk's gluon trainer holds its network under the same key)."""
    return any(
        call.attr in ("cpu", "cuda")
        or (call.func is not None and (facts.bindings.qualify(call.node.func) or "").startswith("torch."))
        for call in facts.scope.calls
    )
