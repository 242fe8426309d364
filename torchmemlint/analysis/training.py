"""What the values of a scope are: the model, its outputs, losses and activations, followed
by name within one scope in source order (``ScopeFacts``), and how a name is used later
(``uses_allow``). Decided conservatively from what the scope itself shows."""

from __future__ import annotations

import dataclasses
import enum
import re
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Sequence, Set, Tuple, Union

import libcst as cst

from torchmemlint.analysis.autograd import (
    AssignEvent, AUTOGRAD_CALLS, CallEvent, ClassFacts, CRITERION_NAME, Ctx,
    DEVICE_KEEPING_METHODS, EVAL_WORDS, Frame, framework_hook, FRAMEWORK_NO_GRAD_HOOKS,
    FUNCTIONAL_LOSSES, GRAD_KEEPING_METHODS, GRAD_KEEPING_TORCH_FUNCTIONS,
    MODEL_NAME, MODULE_METHODS, MODULE_MOVES, _names_in, NON_TENSOR_TORCH, Scope, ScopeWalk,
)
from torchmemlint.analysis.backward_names import backward_losses, scalar_losses
from torchmemlint.analysis.helper_returns import returned_by, unpacked
from torchmemlint.analysis.loop_items import last_binding, taken_from_before
from torchmemlint.analysis.model_names import bound_mode, lambda_arm, model_part_of, named_models
from torchmemlint.analysis.names import Bindings, dotted_name
from torchmemlint.analysis.returned_mode import last_mode_change, returned_in_eval, switch_written, switching_helper
from torchmemlint.analysis.sinks import indices_target, SINK_FUNCTIONS
from torchmemlint.analysis.syntax import property_returns, slice_of

from torchmemlint.tree import children, node_index



# torch calls that join tensors: `acc = torch.cat((acc, out))` folds `out` into `acc`
FOLDING_TORCH_FUNCTIONS = frozenset(
    {"torch.cat", "torch.concat", "torch.concatenate", "torch.stack", "torch.vstack", "torch.hstack",
     "torch.dstack", "torch.row_stack", "torch.column_stack"}
)
FOLDING_NAMES = frozenset(name.rsplit(".", 1)[-1] for name in FOLDING_TORCH_FUNCTIONS)


class Kind(enum.Enum):
    LOSS = "loss"
    OUTPUT = "model output"
    ACTIVATION = "activation"



# -- values -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Value:
    kind: Kind
    loops: Tuple[cst.CSTNode, ...]  # loops around where it was computed
    scalar: bool = False  # known to be a 0-dim tensor (a reduced loss)


class ScopeFacts:
    """What one scope's values are (the model, losses, activations), replayed in source
    order and following names within the scope only; and questions about its loops."""

    def __init__(self, walk: ScopeWalk, scope: Scope) -> None:
        self.walk = walk
        self.scope = scope
        self.bindings = scope.bindings
        self.forward = scope.owner is not None and scope.name == "forward"
        self.model_names = self._model_names()
        self.loss_instances = self._loss_instances()
        self.backward_calls = [c for c in scope.calls if self.is_backward(c)]
        self.training_calls = [c for c in scope.calls if self.is_training_step(c) or self._trains_inside(c)]
        self.backward_losses = backward_losses(scope, self.backward_calls)
        self.scalar_losses = scalar_losses(self.backward_calls)
        self.env: Dict[str, Value] = {}
        self.depth = 0  # 1 in a helper's scope replayed for a caller (``helper_returns``)
        self.returned: Dict[int, object] = {}  # what each helper call returns (``returned_by``)
        self.torch_named = self.bindings.qualify(cst.Name("torch")) == "torch"  # (a fix may write `torch.no_grad()`)

    def training_beside(self, event: CallEvent) -> List[CallEvent]:
        """The training calls (backward, a step, a helper that trains) that may run with ``event``:
        not those in another arm of an ``if`` (``if adaptive: adapt(model)`` / ``else: model(x)``)."""
        index = node_index(self.walk.module)
        return [call for call in self.training_calls if not index.exclusive(event.node, call.node)]

    def trains_beside(self, event: CallEvent) -> bool:
        return bool(self.training_beside(event))

    # what things are

    def _model_names(self) -> Set[str]:
        names = named_models(self.scope)
        bound: Dict[str, bool] = {}  # `model = learn.model.G_B.to(device)`: a part of a model, by every binding
        for event in self.scope.assigns:
            if len(event.targets) == 1 and (returned_in_eval(self.walk, event.value) or bound_mode(event.value) == "eval"):
                names.add(event.targets[0])  # `net = get_model(args)`, which ends `model.eval()`; `net = load(p).eval()`
            for target in event.targets:
                if MODEL_NAME.match(target):
                    bound[target] = bound.get(target, True) and not event.augmented and model_part_of(event.value)
        return names | {name for name, part in bound.items() if part}

    def is_model(self, dotted: Optional[str]) -> bool:
        if dotted is None:
            return False
        if dotted.endswith(".forward"):
            dotted = dotted[: -len(".forward")]
        if dotted in self.model_names:
            return True
        head, _, attr = dotted.partition(".")
        if head != "self" or "." in attr or not MODEL_NAME.match(attr):
            return False
        owner = self.scope.owner
        if owner is None:
            return True
        if any(method.name == attr for method in owner.methods) and property_returns(owner.methods, attr) is None:
            return False  # a method; a `@property model` reads like an attribute (what it returns)
        return not self._wrapper_attribute(owner, attr)

    def _wrapper_attribute(self, owner: ClassFacts, attr: str) -> bool:
        """Whether every value the class gives `self.<attr>` is an instance of a class the file
        does not know to be an `nn.Module` (`self.model = YOLO(path)`: ultralytics' wrapper,
        whose predictor runs under inference mode itself). `None`, factories
        (`build_model(cfg)`), parameters and torch layers keep it a model."""
        target = f"self.{attr}"
        values = [
            event.value
            for method in owner.methods
            for event in method.assigns
            if event.targets == (target,) and event.value is not None
            and not (type(event.value) is cst.Name and event.value.value == "None")
        ] + (property_returns(owner.methods, attr) or [])
        if not values:
            return False
        modules = self.walk.module_classes()
        for value in values:
            if type(value) is not cst.Call:
                return False
            qualified = self.bindings.qualify(value.func) if type(value.func) in (cst.Name, cst.Attribute) else None
            last = (dotted_name(value.func) or "").rsplit(".", 1)[-1]
            if (
                not last[:1].isupper() or last in modules
                or (qualified or "").startswith("torch.")
                or self.walk.project_module_class(value.func)
            ):
                return False
        return True

    def _loss_instances(self) -> Dict[str, bool]:
        """Names bound to `nn.*Loss(...)` here, and attributes of `self` another method of the
        class binds to one (`self.loss = nn.CrossEntropyLoss()` in `__init__`) -> whether the
        loss they compute is reduced."""
        found: Dict[str, bool] = {}
        owner = self.scope.owner
        if owner is not None and "_self_assigns" not in owner.__dict__:  # (once per class)
            owner._self_assigns = [e for m in owner.methods for e in m.assigns if e.targets and all(t.startswith("self.") for t in e.targets)]
        for event in [*self.scope.assigns, *(owner._self_assigns if owner is not None else ())]:
            value = event.value
            if type(value) is cst.Call and not event.unpacked and not event.augmented:
                qualified = self.bindings.qualify(value.func) if dotted_name(value.func) else None
                if qualified and qualified.startswith("torch.nn.") and qualified.endswith("Loss"):
                    for target in event.targets:
                        found[target] = _reduced(value)
        return found

    def loss_call(self, call: cst.Call) -> Optional[bool]:
        """None if `call` is not a loss computation, else whether its result is known scalar."""
        dotted = dotted_name(call.func)
        if dotted is None:
            return None
        if dotted in self.loss_instances:
            return self.loss_instances[dotted]
        qualified = self.bindings.qualify(call.func)
        if qualified and qualified.startswith("torch.nn.functional."):
            name = qualified.rsplit(".", 1)[-1]
            if name.endswith("_loss") or name in FUNCTIONAL_LOSSES:
                return _reduced(call)
            return None
        if CRITERION_NAME.search(dotted.rsplit(".", 1)[-1]):
            return False
        return None

    def is_backward(self, call: CallEvent, bindings: Optional[Bindings] = None) -> bool:
        """``bindings``: the names seen where ``call`` is (default: this function's)."""
        if call.attr in ("backward", "manual_backward"):
            return True
        return bool(call.func) and (bindings or self.bindings).qualify(call.node.func) in AUTOGRAD_CALLS

    def is_training_step(self, call: CallEvent, bindings: Optional[Bindings] = None) -> bool:
        if self.is_backward(call, bindings):
            return True
        if call.attr == "step" and call.receiver is not None:
            receiver = (dotted_name(call.receiver) or "").rsplit(".", 1)[-1].lower()
            return "opt" in receiver or "scaler" in receiver
        if call.attr == "update_params" and call.receiver is not None:
            # mmengine's ``OptimWrapper.update_params(loss)``: backward, step and zero_grad in one
            return "opt" in (dotted_name(call.receiver) or "").rsplit(".", 1)[-1].lower()
        return False

    def _trains_inside(self, call: CallEvent) -> bool:
        """A function of this file (or a method called on `self`) that backpropagates or steps an
        optimizer, itself or through the functions it calls (two levels): `self._adapt(z)`."""
        func = call.func or ""
        head, _, name = func.rpartition(".")
        if head not in ("", "self") or not name:
            return False
        trains = getattr(self.walk, "_training_functions", None)
        if trains is None:
            functions = [s for s in self.walk.scopes if s.function is not None]
            # each function's calls judged with its own names (its imports, its parameters):
            # the set does not depend on which function's facts were asked first
            found = {s.name for s in functions if any(self.is_training_step(c, s.bindings) for c in s.calls)}
            for _ in range(2):
                found |= {s.name for s in functions if any(
                    (c.func or "").rpartition(".")[2] in found and (c.func or "").rpartition(".")[0] in ("", "self")
                    for c in s.calls)}
            trains = self.walk._training_functions = found  # type: ignore[attr-defined]  # once per file
        return name in trains and name != self.scope.name

    def value_of(self, expr: cst.BaseExpression, ctx: Ctx) -> Optional[Value]:
        """The kind of tensor an expression evaluates to, if this scope shows it."""
        if ctx.no_grad and not self.forward:
            return None
        if type(expr) in (cst.Name, cst.Attribute):
            dotted = dotted_name(expr)
            if dotted is not None and dotted in self.env:
                return self.env[dotted]
            if type(expr) is cst.Attribute and expr.attr.value in ("loss", "logits"):
                base = self.value_of(expr.value, ctx)  # outputs.loss of a transformers model
                if base is not None and base.kind is Kind.OUTPUT:
                    kind = Kind.LOSS if expr.attr.value == "loss" else base.kind
                    return Value(kind, base.loops)
            return None
        if type(expr) is cst.Subscript:
            return self.value_of(expr.value, ctx)
        if type(expr) is cst.BinaryOperation:
            left = self.value_of(expr.left, ctx)
            right = self.value_of(expr.right, ctx)
            if left is None or right is None:
                known = left or right
                other = expr.right if left is not None else expr.left
                if known is None:
                    return None
                return dataclasses.replace(known, scalar=known.scalar and _is_number(other))
            kind = Kind.LOSS if Kind.LOSS in (left.kind, right.kind) else left.kind
            return Value(kind, left.loops if len(left.loops) >= len(right.loops) else right.loops)
        if type(expr) is cst.UnaryOperation:
            return self.value_of(expr.expression, ctx)
        if type(expr) is cst.Call:
            return self._call_value(expr, ctx)
        if type(expr) in (cst.Tuple, cst.List, cst.Dict):
            # `outputs.append((out, y))`, `{"loss": loss}`: the container holds the tensor
            return _held(self.value_of(element.value, ctx) for element in expr.elements  # type: ignore[attr-defined]
                         if type(element) in (cst.Element, cst.DictElement))
        return None

    def _call_value(self, call: cst.Call, ctx: Ctx) -> Optional[Value]:
        func = call.func
        dotted = dotted_name(func)
        if self.forward:
            return self._activation(call, ctx)
        if self.is_model(dotted) or self.model_part(call):
            return Value(Kind.OUTPUT, ctx.loops)
        scalar = self.loss_call(call)
        if scalar is not None:
            return Value(Kind.LOSS, ctx.loops, scalar)
        qualified = self.bindings.qualify(func) if dotted else None
        if type(func) is cst.Attribute and qualified is None:
            if func.attr.value in GRAD_KEEPING_METHODS:
                base = self.value_of(func.value, ctx)
                if base is None:
                    return None
                reduced = func.attr.value in ("mean", "sum") and not call.args
                return dataclasses.replace(base, scalar=base.scalar or reduced)
            if func.attr.value == "scale" and call.args:  # GradScaler.scale(loss)
                return self.value_of(call.args[0].value, ctx)
        if call.args and _keeps_graph(qualified):
            base = self.value_of(call.args[0].value, ctx)
            return dataclasses.replace(base, scalar=False) if base else None
        returned = returned_by(self, call, ctx) if qualified is None else None  # a helper's
        return _held(returned) if type(returned) is tuple else returned  # type: ignore[return-value]

    def model_part(self, call: cst.Call) -> bool:
        """`self.model.decoder1(z)`, `model.encode(x)`: a part or a method of the model run on an input given by
        position, as a module's forward takes it (not a module's own methods: `model.parameters()`, `model.to(device)`)."""
        head, _, last = (dotted_name(call.func) or "").rpartition(".")
        by_keyword = bool(call.args) and MODEL_NAME.match(last) is not None  # a part named as a model: `model.model(input_ids=ids)`
        return (
            (by_keyword or any(arg.keyword is None and not arg.star for arg in call.args))
            and bool(head) and last not in MODULE_METHODS and last not in MODULE_MOVES
            and not last.startswith("_") and self.is_model(head)
            and not (head == "self" and self._hook_attribute(last))
        )

    def _hook_attribute(self, attr: str) -> bool:
        """`self.post_process = post_process if post_process is not None else lambda x: x`: a
        callable the class keeps (a lambda by default), not a part of the model."""
        owner = self.scope.owner
        if owner is None or any(method.name == attr for method in owner.methods):
            return False
        target = f"self.{attr}"
        return any(
            event.targets == (target,) and lambda_arm(event.value)
            for method in owner.methods for event in method.assigns
        )

    def _method_result(self, value: Optional[cst.BaseExpression]) -> bool:
        """What a method of the model returns (``model_part``), not the model's own call."""
        if type(value) is not cst.Call:
            return False
        return not self.is_model(dotted_name(value.func)) and self.model_part(value)

    def _activation(self, call: cst.Call, ctx: Ctx) -> Optional[Value]:
        """In forward: submodule calls, torch ops on activations and tensor methods."""
        func = call.func
        dotted = dotted_name(func)
        activation = Value(Kind.ACTIVATION, ctx.loops)
        if dotted is not None and dotted.startswith("self.") and dotted.count(".") == 1:
            # a submodule applied to an activation
            if any(self.value_of(arg.value, ctx) is not None for arg in call.args):
                return activation
            return None
        if type(func) is cst.Attribute and dotted_name(func.value) != "self":
            base = self.value_of(func.value, ctx)
            if base is not None and func.attr.value in DEVICE_KEEPING_METHODS:
                if func.attr.value == "to" and any(_mentions_cpu(a.value) for a in call.args):
                    return None
                return base
            if base is not None:
                return None
        qualified = self.bindings.qualify(func) if dotted else None
        if qualified and qualified.startswith("torch.") and not NON_TENSOR_TORCH.match(qualified):
            for arg in call.args:
                listed = type(arg.value) in (cst.List, cst.Tuple)
                values = arg.value.elements if listed else [arg]
                if any(self.value_of(v.value, ctx) is not None for v in values):
                    return activation
        return None

    # replay
    def replay(self) -> Iterator[Union[CallEvent, AssignEvent]]:
        """The scope's calls and assignments in source order; after each assignment is handed
        out (and its value asked about), its targets take their new value."""
        if self.forward:
            for param in self._activation_params():
                self.env[param] = Value(Kind.ACTIVATION, ())
        events: List[Union[CallEvent, AssignEvent]] = [*self.scope.calls, *self.scope.assigns]
        events.sort(key=lambda event: event.seq)
        for event in events:
            yield event
            if isinstance(event, AssignEvent):
                self._bind(event)

    def _activation_params(self) -> List[str]:
        params = [p for p in self.scope.params() if p.name.value != "self"]
        found = [params[0].name.value] if params and params[0].default is None else []
        for param in params:
            annotation = param.annotation
            annotated = dotted_name(annotation.annotation) if annotation is not None else None
            if (annotated or "").endswith("Tensor"):
                found.append(param.name.value)
        return found

    def _bind(self, event: AssignEvent) -> None:
        if self._bind_elementwise(event):
            return
        value = None
        if event.value is not None and not event.augmented:
            value = self.value_of(event.value, event.ctx)
            if set(event.targets) & self.scalar_losses and not event.ctx.no_grad:
                # what `.backward()` is called on is a 0-dim loss, whatever computed it
                if value is not None:
                    value = Value(Kind.LOSS, value.loops, True)
                elif type(event.value) in (cst.Call, cst.BinaryOperation) and not _detaches(
                    event.value
                ) and not _host_call(event.value, self.bindings.qualify):
                    value = Value(Kind.LOSS, event.ctx.loops, True)
        indices = indices_target(event.node, event.value, self.bindings.qualify) if value is not None else None
        for target in event.targets:
            if event.augmented:
                continue
            if value is None or target == indices:
                self.env.pop(target, None)  # `_, idx = torch.topk(p, 1)`: indices, no graph
            elif event.unpacked and value.kind is Kind.OUTPUT and self._method_result(event.value):
                self.env.pop(target, None)  # `loss, count = model.forward_loss(b)`: not all tensors
            elif event.unpacked and value.kind is Kind.LOSS:
                # `loss, logs = ...`: only one of them is the loss; the one `.backward()` is
                # called on is, and so is a loss beside it (`agg_loss, loss = loss_fn(...)`)
                self._bind_unpacked_loss(event, target, value)
            else:
                self.env[target] = value

    def _bind_elementwise(self, event: AssignEvent) -> bool:
        """`out, target = model(x), y`, `pred, truth = helper(batch, out)`: each name takes
        the value of its own element (``helper_returns.unpacked``)."""
        node = event.node
        if not event.unpacked or type(node) is not cst.Assign or len(node.targets) != 1:
            return False
        names = node.targets[0].target
        values = unpacked(self, event)
        if values is None or type(names) not in (cst.Tuple, cst.List) or len(names.elements) != len(values) or any(
            type(element) is not cst.Element for element in names.elements
        ):
            return False
        for name, element in zip(names.elements, values):
            target = dotted_name(name.value)
            if target is None:
                continue
            value = (
                self.value_of(element, event.ctx) if isinstance(element, cst.CSTNode) else element
            )
            if value is not None and target in self.scalar_losses and not event.ctx.no_grad:
                value = Value(Kind.LOSS, value.loops, True)
            if value is None:
                self.env.pop(target, None)
            else:
                self.env[target] = value
        return True

    def _bind_unpacked_loss(self, event: AssignEvent, target: str, value: Value) -> None:
        backwarded = set(event.targets) & self.scalar_losses
        if target in backwarded:
            self.env[target] = Value(Kind.LOSS, value.loops, True)
        elif backwarded and _LOSS_WORD.search(target.rsplit(".", 1)[-1]):
            self.env[target] = Value(Kind.LOSS, value.loops, False)
        else:
            self.env.pop(target, None)

    def folded(self, event: AssignEvent) -> Optional[cst.BaseExpression]:
        """``acc = torch.cat((acc, out), 0)`` (``torch.stack``, ``vstack`` ..., also as one arm
        of ``out if acc is None else torch.cat(...)``): the other tensor the call joins to the
        target, which the target then carries into the next iteration; None for anything else."""
        value = event.value
        if event.augmented or event.unpacked or len(event.targets) != 1 or value is None:
            return None
        target = event.targets[0]
        for option in (value.body, value.orelse) if type(value) is cst.IfExp else (value,):
            if type(option) is not cst.Call or dotted_name(option.func) is None:
                continue
            if self.bindings.qualify(option.func) not in FOLDING_TORCH_FUNCTIONS:
                continue
            tensors = next(
                (arg.value for arg in option.args
                 if (arg.keyword is None and not arg.star) or (arg.keyword is not None and arg.keyword.value == "tensors")),
                None,
            )
            if type(tensors) not in (cst.List, cst.Tuple):
                continue
            elements = [e.value for e in tensors.elements if type(e) is cst.Element]  # type: ignore[union-attr]
            if len(elements) != len(tensors.elements) or not any(dotted_name(e) == target for e in elements):  # type: ignore[union-attr]
                continue
            others = [e for e in elements if dotted_name(e) != target]
            if len(others) == 1:
                return others[0]
        return None

    def trains_around(self, event: CallEvent, eval_seq: int, target: Optional[Frame]) -> bool:
        """A backward or step between `.eval()` and the call, or in what would be wrapped."""
        for call in self.training_calls:
            if eval_seq < call.seq < event.seq:
                return True
            if target is not None and any(f.statement is target.statement for f in call.ctx.chain):
                return True
        return False

    def grad_controlled(self, seq: int) -> bool:
        scope = self.scope
        if scope.no_grad or (scope.grad_off_seq is not None and scope.grad_off_seq < seq):
            return True
        name = scope.name
        return bool(name) and (
            name in self.walk.no_grad_callees or framework_hook(scope.owner, name, scope.bindings)
        )

    def last_mode_change(self, callee: str, seq: int) -> Optional[Tuple[int, str]]:
        return last_mode_change(self.walk, self.scope, callee, seq)

    def switch_written(self, seq: int) -> Optional[str]:
        return switch_written(self.scope, seq)

    def switching_helper(self, seq: int, callee: str) -> Optional[str]:
        return switching_helper(self.walk, self.scope, seq, callee)

    def wrap_target(self, event: CallEvent, after_seq: Optional[int]) -> Optional[Frame]:
        """The statement to wrap in `no_grad`; None: decorate the function instead."""
        if after_seq is None and self.scope.function is not None:
            return None
        chain = [frame for frame in event.ctx.chain if after_seq is None or frame.seq > after_seq]
        for frame in chain:
            if type(frame.statement) in (cst.For, cst.While):
                return frame
        return event.ctx.chain[-1]

    def loops_kept_across(
        self, name: str, loops: Tuple[cst.CSTNode, ...], accumulation: cst.CSTNode
    ) -> List[cst.CSTNode]:
        """The enclosing loops whose iterations the accumulator outlives (innermost first)."""
        kept = []
        for loop in reversed(loops):
            if self.reassigned_in(name, loop, accumulation):
                break
            kept.append(loop)
        return kept

    def in_eval_mode(self, seq: int) -> bool:
        """The last `.eval()` / `.train()` on a model before `seq` is `.eval()`."""
        last = None
        for call in self.scope.calls:
            if call.seq >= seq:
                break
            if call.attr in ("eval", "train") and self.is_model(
                dotted_name(call.receiver) if call.receiver is not None else None
            ):
                last = call.attr == "eval" and not call.node.args
        return bool(last)

    def reassigned_in(self, name: str, loop: cst.CSTNode, accumulation: cst.CSTNode) -> bool:
        """`name` is rebound on every iteration of `loop`. A reset under an `if` inside the
        loop (`if step % 100 == 99: running_loss = 0.0`, the PyTorch FAQ's example) is not
        one: up to N iterations' graphs stay alive; nor is keeping a slice of itself
        (`recent = recent[-k:]`, rlprop's DQN: the last k iterations' graphs stay alive)."""
        return any(
            name in event.targets and not event.augmented and loop in event.ctx.loops
            and event.node is not accumulation and not _conditional_in(event.ctx, loop)
            and not slice_of(event.value, name)
            for event in self.scope.assigns
        )

    def loop_has(self, loop: cst.CSTNode, calls: Sequence[CallEvent]) -> bool:
        return any(loop in call.ctx.loops for call in calls)

    def loop_computes(self, loop: cst.CSTNode) -> bool:
        """The loop runs the model, steps, or computes a loss from something it called: it
        iterates over batches (a loop that sums the losses of one batch's heads is not one)."""
        for call in self.scope.calls:
            if loop not in call.ctx.loops:
                continue
            if self.is_model(call.func) or self.model_part(call.node) or self.is_training_step(call):
                return True
            if self._helper_runs_model(call) or self._trains_inside(call):  # (`loss = self.optimize(batch)`)
                return True
            if self.loss_call(call.node) is not None and any(
                self.computed_in(arg.value, loop, call.seq) for arg in call.node.args
            ):
                return True
        return False

    def _helper_runs_model(self, call: CallEvent) -> bool:
        """A helper of this file handed the model (``_run_batch(batch, model, collate)``) that
        returns what it ran the model on: its output (``helper_returns``)."""
        if not any(self.is_model(dotted_name(arg.value)) for arg in call.node.args):
            return False
        returned = returned_by(self, call.node, call.ctx)
        values = returned if type(returned) is tuple else (returned,)
        return any(value is not None and value.kind is Kind.OUTPUT for value in values)

    def computed_in(self, expr: cst.BaseExpression, loop: cst.CSTNode, seq: int) -> bool:
        """`expr` is a call result, or a name last assigned a call result, in this loop."""
        if type(expr) is cst.Call:
            return True
        dotted = dotted_name(expr) if type(expr) in (cst.Name, cst.Attribute) else None
        if dotted is None:
            return False
        last = None
        for event in self.scope.assigns:
            if event.seq < seq and dotted in event.targets:
                last = event
        return (
            last is not None and loop in last.ctx.loops and type(last.value) is cst.Call
        )

    def starts_as_number(self, name: str, ctx: Ctx) -> bool:
        """The accumulator's last assignment before the loop is a number: `total = 0.0`."""
        start = self._start(name, ctx)
        return start is not None and _is_number(start)

    def starts_as_text(self, name: str, ctx: Ctx) -> bool:
        """The accumulator's last assignment before the loop is a string (`out = ""`): a
        tensor added to it raises, so what it sums is text (a tokenizer's `decode`)."""
        return isinstance(self._start(name, ctx), (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString))

    def _start(self, name: str, ctx: Ctx) -> Optional[cst.BaseExpression]:
        if not ctx.loops:
            return None  # (a step hook's attribute: ``step_hooks``)
        loop = ctx.loops[-1]
        loop_seq = next(frame.seq for frame in ctx.chain if frame.statement is loop)
        start = None
        for event in self.scope.assigns:
            if event.seq < loop_seq and name in event.targets and not event.augmented:
                start = event
        return None if start is None else start.value

    def built_in_loop(self, call: CallEvent) -> bool:
        """What is backpropagated was computed in this iteration (not a graph from before the
        loop that every iteration backpropagates through again)."""
        receiver = call.receiver
        functional = self.bindings.qualify(call.node.func) in AUTOGRAD_CALLS
        if call.attr != "backward" or receiver is None or functional:
            # `torch.autograd.backward(loss, ...)`: the tensors are the first argument
            receiver = call.node.args[0].value if call.node.args else None
        names = list(_primary_names(receiver)) if receiver is not None else []
        loop = call.ctx.loops[-1]
        for name in names:
            last = last_binding(self.scope, name, call.seq)
            if last is None or loop not in last.ctx.loops or taken_from_before(self.scope, last, loop, call.seq):
                return False
        return bool(names)

    def unbounded_list(self, attribute: str) -> bool:
        owner = self.scope.owner
        assert owner is not None
        initialised = False
        target = f"self.{attribute}"
        for method in owner.methods:
            for assign in method.assigns:
                if target not in assign.targets:
                    continue
                if method.name != "__init__" or assign.augmented:
                    return False  # reset or rebound elsewhere: the class manages its size
                initialised = initialised or _is_empty_list(assign.value)
            for call in method.calls:
                if call.receiver is not None and dotted_name(call.receiver) == target:
                    if call.attr in ("clear", "pop", "popleft", "remove"):
                        return False
        return initialised and not _deleted(owner, target)


def _conditional_in(ctx: Ctx, loop: cst.CSTNode) -> bool:
    """Whether the statement of `ctx` sits under an `if` inside `loop`."""
    statements = [frame.statement for frame in ctx.chain]
    inside = statements[statements.index(loop) + 1 :] if loop in statements else []
    return any(type(statement) is cst.If for statement in inside)


def _primary_names(expr: cst.BaseExpression) -> Iterator[str]:
    """The tensors an expression is computed from: `(a + b).mean()` -> a, b;
    `scaler.scale(loss)` -> loss; `out[i]` -> out."""
    dotted = dotted_name(expr) if type(expr) in (cst.Name, cst.Attribute) else None
    if dotted is not None:
        yield dotted
    elif type(expr) is cst.BinaryOperation:
        yield from _primary_names(expr.left)
        yield from _primary_names(expr.right)
    elif type(expr) is cst.UnaryOperation:
        yield from _primary_names(expr.expression)
    elif type(expr) is cst.Subscript:
        yield from _primary_names(expr.value)
    elif type(expr) is cst.Call and type(expr.func) is cst.Attribute:
        if expr.func.attr.value == "scale" and expr.args:
            yield from _primary_names(expr.args[0].value)
        else:
            yield from _primary_names(expr.func.value)
    else:
        yield "?"  # something we cannot follow


def _held(values) -> Optional[Value]:
    """What a tuple, list or dict of these values keeps: a loss before a model output before
    an activation, never a 0-dim scalar (``.item()`` is not offered on a container)."""
    found = [value for value in values if value is not None]
    if not found:
        return None
    rank = {Kind.LOSS: 0, Kind.OUTPUT: 1}
    best = min(found, key=lambda value: rank.get(value.kind, 2))
    return dataclasses.replace(best, scalar=False)


def _keeps_graph(qualified: Optional[str]) -> bool:
    """A torch function whose result, computed from a tensor with a graph, carries that graph
    (`torch.mean(out)`, `torch.sigmoid(out)`); not one that returns numbers, indices or a new
    leaf (`torch.argmax`, `torch.save`, `torch.zeros_like`, `torch.tensor`)."""
    if qualified in GRAD_KEEPING_TORCH_FUNCTIONS:
        return True
    if not qualified or not qualified.startswith("torch.") or qualified.count(".") != 1:
        return False  # `torch.nn.functional.*` losses: `loss_call`; submodules: not known
    return not (
        NON_TENSOR_TORCH.match(qualified) or qualified in SINK_FUNCTIONS or qualified.endswith("_like")
        or qualified in _NEW_TENSORS
    )


_NEW_TENSORS = frozenset(
    {"torch.tensor", "torch.Tensor", "torch.as_tensor", "torch.from_numpy", "torch.unique",
     "torch.bucketize", "torch.searchsorted", "torch.no_grad", "torch.device", "torch.manual_seed"}
)


def _reduced(call: cst.Call) -> bool:
    reduction = _keyword(call, "reduction")
    if reduction is None:
        return True
    value = reduction.value
    return type(value) is cst.SimpleString and value.evaluated_value in ("mean", "sum")


def _keyed_list(receiver: cst.BaseExpression) -> Optional[str]:
    """The literal key of `name["key"]` (a dict of lists), else None."""
    if type(receiver) is not cst.Subscript or dotted_name(receiver.value) is None:
        return None
    if len(receiver.slice) != 1 or type(receiver.slice[0].slice) is not cst.Index:
        return None
    key = receiver.slice[0].slice.value
    return key.evaluated_value if type(key) is cst.SimpleString else None


def _keyword(call: cst.Call, name: str) -> Optional[cst.Arg]:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def _is_number(expr: cst.BaseExpression) -> bool:
    if type(expr) is cst.UnaryOperation:
        expr = expr.expression
    return type(expr) in (cst.Integer, cst.Float)


def _host_call(expr: cst.BaseExpression, qualify) -> bool:  # numpy's, math's: never a graph
    return type(expr) is cst.Call and (qualify(expr.func) or "").partition(".")[0] in ("numpy", "math")


def _detaches(expr: cst.BaseExpression) -> bool:
    if type(expr) is cst.Call:
        func = expr.func
        if type(func) is cst.Name and func.value in ("float", "int", "bool"):
            return True
        if type(func) is cst.Attribute:
            return func.attr.value in ("item", "detach", "tolist", "numpy") or _detaches(func.value)
    if type(expr) is cst.Attribute and expr.attr.value == "data":
        return True
    return False


def _mentions_cpu(expr: cst.BaseExpression) -> bool:
    return type(expr) is cst.SimpleString and "cpu" in expr.value


def _self_attribute(expr: cst.BaseExpression) -> Optional[str]:
    dotted = dotted_name(expr)
    return _self_attribute_name(dotted) if dotted else None


def _self_attribute_name(dotted: str) -> Optional[str]:
    head, _, attribute = dotted.partition(".")
    return attribute if head == "self" and attribute and "." not in attribute else None


def _is_empty_list(value: Optional[cst.BaseExpression]) -> bool:
    if type(value) is cst.List:
        return not value.elements
    return (
        type(value) is cst.Call and type(value.func) is cst.Name
        and value.func.value == "list" and not value.args
    )


def _deleted(owner: ClassFacts, target: str) -> bool:
    """`del self.x[:]` / `del self.x` anywhere in the class."""
    for statement in _class_small_statements(owner.node):
        if type(statement) is cst.Del:
            for name in _names_in(statement.target):
                if name == target:
                    return True
    return False


def _class_small_statements(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    for child in children(node):
        if isinstance(child, cst.BaseSmallStatement):
            yield child
        elif isinstance(child, (cst.BaseStatement, cst.BaseSuite, cst.ExceptHandler,
                                cst.Else, cst.Finally, cst.MatchCase)):
            yield from _class_small_statements(child)


def _buffers(owner: Optional[ClassFacts]) -> Set[str]:
    found: Set[str] = set()
    for method in owner.methods if owner else ():
        for call in method.calls:
            if call.attr == "register_buffer" and call.node.args:
                first = call.node.args[0].value
                if type(first) is cst.SimpleString:
                    found.add(str(first.evaluated_value))
    return found


def is_eval_name(name: str) -> bool:
    """`evaluate`, `run_validation`, `predictBatch`, `test`; not test-suite functions
    (`test_shape`, `_test_outputs`, `testShape`) nor Lightning hooks."""
    bare = name.lstrip("_")
    if not bare or FRAMEWORK_NO_GRAD_HOOKS.match(name) or re.match(r"test(?:_|[A-Z])", bare):
        return False
    words = re.findall(r"[a-z]+|[A-Z][a-z]*", name)
    return any(word.lower() in EVAL_WORDS for word in words)


_LOSS_WORD = re.compile(r"(?i)loss")
