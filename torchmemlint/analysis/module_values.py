"""A scope's values, with the modules its class holds known by what they are built from.

``ScopeFacts`` tells a model output by the name it is called through (``model(x)``,
``self.net(x)``, ``model.encode(x)``). The modules a class holds are known better by what its
methods bind to them (``module_calls.module_attribute``: ``self._actor = DiscreteActor(...)``, a
class of the project that is an ``nn.Module``; a module handed to ``__init__`` and annotated so
...). ``ModuleValues`` is ``ScopeFacts`` where a call of such an attribute, or of a method of
one that takes an input by position (``self._actor.log_prob(obs, action)``), is a model output
whatever the attribute is named: the value the loop rules follow (TML502: kioku's PPO sums
``actor_loss`` made of ``self._actor``'s log-probabilities across its mini-batches). Helpers
replayed for a caller (``helper_returns``) read their values the same way.
"""

from __future__ import annotations

from typing import Dict, Optional

import libcst as cst

from torchmemlint.analysis.autograd import Ctx
from torchmemlint.analysis.module_calls import NOT_OUTPUT_METHODS, module_attribute
from torchmemlint.analysis.training import Kind, ScopeFacts, Value


class ModuleValues(ScopeFacts):
    """``ScopeFacts`` that also knows the modules the scope's class holds."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._held_modules: Dict[str, bool] = {}  # attribute -> a module the class holds

    def _call_value(self, call: cst.Call, ctx: Ctx) -> Optional[Value]:
        value = super()._call_value(call, ctx)
        if value is not None or self.forward or self.scope.owner is None:
            return value
        return Value(Kind.OUTPUT, ctx.loops) if self._runs_held_module(call) else None

    def _runs_held_module(self, call: cst.Call) -> bool:
        """``self.<attr>(x)`` or ``self.<attr>.<method>(x)`` on a module the class holds, given
        an input by position (not a module's own methods: ``.parameters()``, ``.to(device)``)."""
        func = call.func
        if not any(arg.keyword is None and not arg.star for arg in call.args):
            return False
        if type(func) is cst.Attribute and type(func.value) is cst.Attribute:  # self.<attr>.<method>(x)
            method, func = func.attr.value, func.value
            if method in NOT_OUTPUT_METHODS or method.startswith("_"):
                return False
        if type(func) is not cst.Attribute or type(func.value) is not cst.Name or func.value.value != "self":
            return False
        return self._held(func.attr.value)

    def _held(self, attr: str) -> bool:
        if attr not in self._held_modules:
            self._held_modules[attr] = module_attribute(self, attr)
        return self._held_modules[attr]
