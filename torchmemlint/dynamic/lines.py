"""Memory at the peak by source line, and the op trace the measured findings read.

A ``StepObserver`` rides along with the ``LiveTracker`` of one measured step.  For every
storage the step allocates it notes the line of the user's code that made it: the innermost
frame in the user's files, so that torch's and other libraries' frames fold into the user's
call site.  Backward ops run from autograd's C++ engine with no user frame on the stack; they
take the line of the forward op whose backward node runs them (each node created in forward is
tagged with its line).  Parameters and buffers get the line where they were registered while the
model was built (``self.conv = nn.Conv2d(...)``), their gradients the same line.

At the peak event the tracker reached, every live storage is charged to its line: the lines'
bytes add up to the step's peak exactly (they are the same storages), plus the parameters and
buffers, which exist before the step.  Nothing here changes what the step keeps: the observer
holds ids, shapes and lines, never tensors.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import sys
import sysconfig
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Sequence, Set, Tuple

import torch
from torch import nn
from torch.nn.modules import module as module_hooks
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

Site = Tuple[str, int]  # (filename, row)
# Ops whose backward reads their own result (autograd saves the output, not the input).
SAVES_RESULT = frozenset({
    "sigmoid", "tanh", "exp", "exp2", "expm1", "_softmax", "softmax", "_log_softmax", "log_softmax",
    "_safe_softmax", "relu", "sqrt", "rsqrt", "reciprocal", "hardsigmoid", "elu", "threshold",
    "sigmoid_", "tanh_", "exp_", "relu_", "sqrt_", "rsqrt_", "elu_",
})
NO_SITE: Site = ("(no user line)", 0)

# "what" of a line: why the bytes are there at the peak.
PARAMETER = "parameter"
BUFFER = "buffer"
GRADIENT = "gradient"
SAVED = "saved for backward"
OUTPUT = "output"
TEMPORARY = "temporary"
RESIDENT = (PARAMETER, BUFFER)

_TORCHMEMLINT = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_CHECKPOINT_FILE = os.path.join("torch", "utils", "checkpoint.py")
# The driver of the measured step: frames beyond it are whoever asked for the measurement.
_DRIVER = os.path.join("torchmemlint", "dynamic", "measure.py")


def library_directories() -> Tuple[str, ...]:
    """Directories whose frames are folded into the user's call site."""
    paths = sysconfig.get_paths()
    found = [os.path.dirname(torch.__file__) + os.sep, _TORCHMEMLINT]
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        if paths.get(key):
            found.append(paths[key] + os.sep)
    return tuple(dict.fromkeys(found))


@dataclass
class TensorRef:
    """One tensor argument or result of a recorded op (no reference to the tensor)."""

    sid: Any  # tracked storage id, ("x", id) for pre-existing storages, None: no storage
    shape: Tuple[int, ...]
    stride: Tuple[int, ...]
    numel: int
    floating: bool
    itemsize: int


@dataclass
class OpRecord:
    index: int
    name: str  # aten overload packet name, e.g. "_softmax", "bmm", "leaky_relu_"
    phase: str
    module: str
    site: Site
    inputs: List[Optional[TensorRef]]  # positional args and kwargs in schema order; None: not a tensor
    args: List[Any]  # the same positions: non-tensor values (dims, flags), TensorRef for tensors
    outputs: List[TensorRef]
    mutated: List[int] = field(default_factory=list)  # positions the op writes in place
    checkpoint_site: Optional[Site] = None  # the user's call of torch.utils.checkpoint around it


@dataclass
class LineBytes:
    filename: str
    row: int
    module: str
    what: str
    bytes: int

    def to_dict(self) -> Dict[str, Any]:
        return {"filename": self.filename, "row": self.row, "module": self.module,
                "bytes": self.bytes, "what": self.what}


@dataclass
class PoolSlot:
    """A strided pooling module of the built model (or the slot one held before it was
    replaced), with its parent's other children in registration order."""

    name: str  # qualified name of the slot
    stride: int  # the pool's stride, height times width (4 for a 2x2 stride)
    replaced_at: Optional[Site]  # the user's line that replaced the pool, None: still a pool
    replacement: str  # class of what holds the slot now
    before: List[str]  # qualified names of the parent's children registered before the slot
    after: List[str]  # ... and after it (for a last child: the parent's later siblings)
    called: Dict[str, Tuple[Site, int]] = field(default_factory=dict)  # later child -> (call line, op index)
    in_model: bool = True  # False: the pool's parent was built, but only its other children were kept
    kept_at: Optional[Site] = None  # then: the line that put the last child before the pool into the model


class _NodeSites(TorchFunctionMode):
    """Tags each autograd node made in forward with the user's line of the op that made it."""

    def __init__(self, observer: "StepObserver") -> None:
        super().__init__()
        self.observer = observer

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if self.observer.failed is not None:
            return out
        try:
            site = None
            for leaf in tree_flatten(out)[0]:
                if isinstance(leaf, torch.Tensor):
                    node = leaf.grad_fn
                    if node is not None and "tml_site" not in node.metadata:
                        if site is None:
                            site = self.observer.site() or NO_SITE
                        _tag(node, site)
        except Exception as error:  # noqa: BLE001 - a bug here is not the model's
            self.observer.failed = "%s: %s" % (type(error).__name__, error)
        return out


def _tag(node: Any, site: Site) -> None:
    """Tag ``node`` and the untagged nodes behind it: those a Python function made on the
    way to its result (the mode sees only the outermost call)."""
    pending = [node]
    while pending:
        current = pending.pop()
        try:
            metadata = current.metadata
        except AttributeError:  # a node type without metadata
            continue
        if "tml_site" in metadata:
            continue
        metadata["tml_site"] = site
        pending.extend(following for following, _ in current.next_functions if following is not None)


class StepObserver:
    """Records, for one measured step, the line behind every storage and the op trace.

    ``user_roots``: the files to attribute to, as path prefixes; None: every file outside
    torch, the standard library, site-packages and torchmemlint (the user's own code).
    """

    def __init__(self, user_roots: Optional[Sequence[str]] = None) -> None:
        self.user_roots = tuple(os.path.abspath(r) for r in user_roots) if user_roots else None
        self._library = library_directories()
        self._is_user: Dict[str, bool] = {}
        self.sites: Dict[int, Site] = {}  # storage id -> line
        self.phases: Dict[int, str] = {}
        self.modules: Dict[int, str] = {}
        self.nbytes: Dict[int, int] = {}
        self.saved_by: Dict[int, Set[int]] = {}  # storage id -> indices of the ops that saved it
        self._packs: Dict[Tuple[int, int], int] = {}
        self.trace: List[OpRecord] = []
        self.param_sites: Dict[Tuple[int, str], Site] = {}  # (id(module), name) -> line
        self.module_sites: Dict[str, Site] = {}  # leaf module of a library class -> built at
        self.module_created: Dict[int, Site] = {}  # id(module) -> the line that called its class
        self.lines: List[LineBytes] = []
        self.finished = False  # finish() ran: the step completed
        self.failed: Optional[str] = None  # the observer's own error, when it stopped observing
        self.peak_bytes = 0
        self.output_ids: Set[int] = set()
        self.param_ids: Set[Any] = set()
        # (id(parent), name) -> (line, pool stride) for a strided pool replaced while the model was built
        self._replaced_pools: Dict[Tuple[int, str], Tuple[Site, int]] = {}
        # id(parent) -> child name -> (id(child), pool stride): every registration while building
        self._children: Dict[int, Dict[str, Tuple[int, int]]] = {}
        self._calls: Dict[int, Tuple[Site, int]] = {}  # id(module) -> (first call's line, op index)
        self.pools: List[PoolSlot] = []

    # -- where the user's code is -------------------------------------------------------

    def is_user_file(self, filename: str) -> bool:
        known = self._is_user.get(filename)
        if known is None:
            if not filename or filename.startswith("<"):
                known = False
            else:
                path = os.path.abspath(filename)
                if self.user_roots is not None:
                    known = path.startswith(self.user_roots)
                else:
                    known = not path.startswith(self._library)
            self._is_user[filename] = known
        return known

    def site(self) -> Optional[Site]:
        frame = sys._getframe(1)
        while frame is not None:
            filename = frame.f_code.co_filename
            if filename.endswith(_DRIVER):
                return None
            if self.is_user_file(filename):
                return (filename, frame.f_lineno)
            frame = frame.f_back
        return None

    def _safe_site(self) -> Optional[Site]:
        """``site()`` for hooks that run inside the user's constructor: never raises."""
        try:
            return self.site()
        except Exception as error:  # noqa: BLE001 - a bug here is not the model's
            self.failed = "%s: %s" % (type(error).__name__, error)
            return None

    def _checkpoint_site(self) -> Optional[Site]:
        """The user's line that called torch.utils.checkpoint, when this op runs inside it."""
        frame = sys._getframe(1)
        inside = False
        while frame is not None:
            filename = frame.f_code.co_filename
            if filename.endswith(_DRIVER):
                return None
            if filename.endswith(_CHECKPOINT_FILE):
                inside = True
            elif inside and self.is_user_file(filename):
                return (filename, frame.f_lineno)
            frame = frame.f_back
        return None

    def _op_site(self) -> Site:
        found = self.site()
        if found is not None:
            return found
        node = torch._C._current_autograd_node()
        if node is not None:
            tagged = node.metadata.get("tml_site")
            if tagged == NO_SITE:
                # The loss torchmemlint adds: its backward makes the gradient of the model's
                # output, charged to the line that made the output.
                for following, _ in node.next_functions:
                    if following is not None and hasattr(following, "metadata"):
                        tagged = following.metadata.get("tml_site", tagged)
                        if tagged != NO_SITE:
                            break
            if tagged is not None:
                return tagged
        return NO_SITE

    # -- while the model is built, and during forward -----------------------------------

    @contextlib.contextmanager
    def building(self) -> Iterator[None]:
        """Note where each module is made, and each parameter, buffer and submodule
        registered, while the model is built."""

        def registered(module: nn.Module, name: str, value: Any) -> None:
            found = self._safe_site()
            if found is not None:
                self.param_sites.setdefault((id(module), name), found)

        original_init = nn.Module.__init__
        created = self.module_created

        def init(module: nn.Module, *args: Any, **kwargs: Any) -> None:
            original_init(module, *args, **kwargs)
            if id(module) not in created:
                found = self._safe_site()
                if found is not None:
                    created[id(module)] = found

        def replaced(module: nn.Module, name: str, value: Any) -> None:
            registered(module, name, value)
            self._children.setdefault(id(module), {})[name] = (id(value), pool_stride(value))
            old = module._modules.get(name)
            if old is not None and pool_stride(old) > 1 and pool_stride(value) <= 1:
                found = self._safe_site()
                if found is not None:
                    self._replaced_pools[(id(module), name)] = (found, pool_stride(old))

        nn.Module.__init__ = init  # type: ignore[method-assign]
        handles = [
            module_hooks.register_module_parameter_registration_hook(registered),
            module_hooks.register_module_buffer_registration_hook(registered),
            module_hooks.register_module_module_registration_hook(replaced),
        ]
        try:
            yield
        finally:
            nn.Module.__init__ = original_init  # type: ignore[method-assign]
            for handle in handles:
                handle.remove()

    @contextlib.contextmanager
    def forward(self) -> Iterator[None]:
        """While the forward runs: tag autograd nodes with lines, note each module's first call."""

        def called(module: nn.Module, args: Any) -> None:
            if id(module) not in self._calls:
                self._calls[id(module)] = (self._safe_site() or NO_SITE, len(self.trace))

        handle = module_hooks.register_module_forward_pre_hook(called)
        try:
            with _NodeSites(self):
                yield
        finally:
            handle.remove()

    # -- tracker callbacks --------------------------------------------------------------

    def allocated(self, record: Any) -> None:
        self.sites[record.storage_id] = self._op_site()
        self.phases[record.storage_id] = record.phase
        self.modules[record.storage_id] = record.module
        self.nbytes[record.storage_id] = record.nbytes

    def resized(self, old: int, new: int, nbytes: int) -> None:
        for table in (self.sites, self.phases, self.modules):
            if old in table:
                table[new] = table[old]
        self.nbytes[new] = nbytes

    def saved(self, storage_id: int) -> None:
        # Autograd saves an op's inputs before its kernel runs and its outputs after: the
        # saving op is the next one recorded or the last one (resolved in ``_resolve_saves``).
        key = (storage_id, len(self.trace))
        self._packs[key] = self._packs.get(key, 0) + 1

    def resolve_saves(self) -> None:
        """Fill ``saved_by`` from what autograd packed (``finish`` does it; a step that
        raised before finishing can still be read after this)."""
        self._resolve_saves()

    def _resolve_saves(self) -> None:
        self.saved_by = {}
        for (storage_id, following), count in self._packs.items():
            owners = self.saved_by.setdefault(storage_id, set())
            previous = self.trace[following - 1] if following > 0 else None
            read_next = following < len(self.trace) and any(
                ref is not None and ref.sid == storage_id for ref in self.trace[following].inputs
            )
            made_before = previous is not None and any(ref.sid == storage_id for ref in previous.outputs)
            if read_next and made_before and count == 1:
                # The output of one op read by the next: saved as the first one's result
                # (sigmoid, softmax, ...) or as the second one's input (conv, leaky_relu, ...).
                owners.add(following - 1 if previous.name in SAVES_RESULT else following)
                continue
            if read_next:
                owners.add(following)
                count -= 1
            if count > 0 and previous is not None:
                owners.add(following - 1)

    def op(self, tracker: Any, func: Any, args: Sequence[Any], kwargs: Dict[str, Any], out: Any) -> None:
        name = func.overloadpacket.__name__
        values = list(args) + list(kwargs.values())
        refs = [self._ref(tracker, v) if isinstance(v, torch.Tensor) else None for v in values]
        plain = [ref if ref is not None else _plain(v) for ref, v in zip(refs, values)]
        outputs = [self._ref(tracker, t) for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        if not outputs:
            return  # metadata queries (prim.device, sizes): autograd's saves belong to the op before
        mutated = []
        try:
            for position, argument in enumerate(func._schema.arguments):
                if argument.alias_info is not None and argument.alias_info.is_write:
                    mutated.append(position)
        except AttributeError:
            pass
        module = tracker._current_module()
        record = OpRecord(len(self.trace), name, tracker.phase, module, self._op_site(), refs, plain,
                          [o for o in outputs if o is not None], mutated)
        if "batch_norm" in name:
            record.checkpoint_site = self._checkpoint_site()
        self.trace.append(record)

    @staticmethod
    def _ref(tracker: Any, tensor: torch.Tensor) -> Optional[TensorRef]:
        key = tracker.storage_key(tensor)
        if key is None:
            return None
        return TensorRef(key, tuple(tensor.shape), tuple(tensor.stride()), tensor.numel(),
                         tensor.is_floating_point(), tensor.element_size())

    # -- after the step ---------------------------------------------------------------------

    def outputs_made(self, tracker: Any, output: Any) -> None:
        """The forward's output and the loss (their storages are "output" at the peak)."""
        self.output_ids = storage_ids(tracker, output)

    def finish(self, tracker: Any, module: nn.Module, params: Sequence[torch.Tensor],
               buffers: Sequence[torch.Tensor]) -> None:
        """Charge the storages live at the tracker's peak, and the parameters and buffers,
        to their lines (``self.lines``, largest first)."""
        self.finished = True
        self._resolve_saves()
        self._note_modules(module)
        self._note_pools(module)
        named = list(module.named_parameters())
        sites = self._resident_sites(module)
        grad_sites: Dict[int, Tuple[Site, str]] = {}
        totals: Dict[Tuple[Site, str, str], int] = {}
        for (name, _), param in zip(named, params):
            owner = _owner_name(name)
            site = sites.get(name, NO_SITE)
            self.param_ids.add(tracker.storage_key(param))
            nbytes = _storage_nbytes(param, tracker.round_to)
            key = (site, owner, PARAMETER)
            totals[key] = totals.get(key, 0) + nbytes
            grad = param.grad
            if grad is not None:
                grad_key = tracker.storage_key(grad)
                if isinstance(grad_key, int):
                    grad_sites[grad_key] = (site, owner)
        seen_buffers: Set[int] = set()
        for (name, _), buffer in zip(module.named_buffers(), buffers):
            self.param_ids.add(tracker.storage_key(buffer))
            if buffer is None or id(buffer) in seen_buffers:
                continue
            seen_buffers.add(id(buffer))
            key = (sites.get(name, NO_SITE), _owner_name(name), BUFFER)
            totals[key] = totals.get(key, 0) + _storage_nbytes(buffer, tracker.round_to)
        saved = tracker.saved_ids
        live = self._live_at(tracker.events, tracker.peak.index)
        self.peak_bytes = tracker.peak.bytes
        for storage_id, nbytes in live.items():
            if storage_id in grad_sites:
                site, owner = grad_sites[storage_id]
                key = (site, owner, GRADIENT)
            else:
                what = SAVED if storage_id in saved else OUTPUT if storage_id in self.output_ids else TEMPORARY
                key = (self.sites.get(storage_id, NO_SITE), self.modules.get(storage_id, ""), what)
            totals[key] = totals.get(key, 0) + nbytes
        self.lines = sorted(
            (LineBytes(site[0], site[1], owner, what, nbytes) for (site, owner, what), nbytes in totals.items()),
            key=lambda line: (-line.bytes, line.filename, line.row, line.what),
        )

    @staticmethod
    def _live_at(events: Sequence[Any], index: int) -> Dict[int, int]:
        live: Dict[int, int] = {}
        for event in events:
            if event.index > index:
                break
            if event.delta > 0:
                live[event.storage_id] = event.delta
            else:
                live.pop(event.storage_id, None)
        return live

    def _resident_sites(self, module: nn.Module) -> Dict[str, Site]:
        """Qualified parameter/buffer name -> the line that registered it; for one registered
        outside the user's files (a deep-copied layer), the line that registered its nearest
        enclosing module; else the line of its module's class in the user's files."""
        modules = dict(module.named_modules(remove_duplicate=False))
        found: Dict[str, Site] = {}
        for prefix, sub in modules.items():
            for name in list(sub._parameters) + list(sub._buffers):
                qualified = "%s.%s" % (prefix, name) if prefix else name
                if qualified in found:
                    continue
                site = None
                parts = qualified.split(".")
                for cut in range(len(parts) - 1, -1, -1):
                    parent = modules.get(".".join(parts[:cut]))
                    if parent is not None:
                        site = self.param_sites.get((id(parent), parts[cut]))
                        if site is not None:
                            break
                found[qualified] = site or self._class_site(type(sub)) or NO_SITE
        return found

    def _note_modules(self, root: nn.Module) -> None:
        """``module_sites``: the line that built each leaf module of a library class
        (``self.act = nn.LeakyReLU(0.1)``), by qualified name."""
        modules = dict(root.named_modules(remove_duplicate=False))
        for name, sub in modules.items():
            if not name or next(sub.children(), None) is not None or name in self.module_sites:
                continue
            try:
                library = not self.is_user_file(inspect.getsourcefile(type(sub)) or "")
            except TypeError:
                library = True
            parent, _, last = name.rpartition(".")
            owner = modules.get(parent)
            site = self.module_created.get(id(sub))
            if site is None and owner is not None:
                site = self.param_sites.get((id(owner), last))
            if library and site is not None:
                self.module_sites[name] = site

    def _note_pools(self, root: nn.Module) -> None:
        """``pools``: each strided pool of the model, and each slot a pool held before the
        user's code replaced it, with the children around it and where the later ones ran."""
        modules = dict(root.named_modules())
        names = {id(sub): name for name, sub in modules.items()}

        def children(parent_name: str) -> List[Tuple[str, Any]]:
            prefix = parent_name + "." if parent_name else ""
            return [(prefix + name, child) for name, child in modules[parent_name]._modules.items()]

        for parent_name, parent in modules.items():
            kids = children(parent_name)
            for position, (qualified, child) in enumerate(kids):
                replaced = self._replaced_pools.get((id(parent), qualified.rpartition(".")[2]))
                stride = replaced[1] if replaced else pool_stride(child)
                if stride <= 1 or child is None or names.get(id(child)) != qualified:
                    continue
                after = [name for name, _ in kids[position + 1:]]
                if not after and parent_name:
                    grand = parent_name.rpartition(".")[0]
                    uncles = [name for name, _ in children(grand)]
                    after = uncles[uncles.index(parent_name) + 1:] if parent_name in uncles else []
                slot = PoolSlot(qualified, stride, replaced[0] if replaced else None, type(child).__name__,
                                [name for name, _ in kids[:position]], after)
                for name in after:
                    sub = modules.get(name)
                    if sub is not None and id(sub) in self._calls:
                        slot.called[name] = self._calls[id(sub)]
                self.pools.append(slot)
        self._note_left_out_pools(modules, names)

    def _note_left_out_pools(self, modules: Dict[str, nn.Module], names: Dict[int, str]) -> None:
        """A module built with a strided pool (a ResNet) that is not in the model, whose
        children before and after the pool are (``nn.Sequential(r.conv1, r.bn1, r.relu)``, ``r.layer1``)."""
        for parent, children in self._children.items():
            if parent in names:
                continue  # in the model: ``_note_pools`` saw it
            order = list(children.items())
            for position, (name, (child, stride)) in enumerate(order):
                if stride <= 1 or child in names:
                    continue
                before = [names[c] for _, (c, _) in order[:position] if c in names]
                after = [names[c] for _, (c, _) in order[position + 1:] if c in names]
                if not before or not after:
                    continue
                holder, _, last = before[-1].rpartition(".")
                kept_at = self.param_sites.get((id(modules[holder]), last))
                slot = PoolSlot(name, stride, None, "", before, after, in_model=False, kept_at=kept_at)
                for later in after:
                    if id(modules[later]) in self._calls:
                        slot.called[later] = self._calls[id(modules[later])]
                self.pools.append(slot)

    def _class_site(self, cls: type) -> Optional[Site]:
        try:
            filename = inspect.getsourcefile(cls)
            if filename and self.is_user_file(filename):
                return (filename, inspect.getsourcelines(cls)[1])
        except (OSError, TypeError):
            pass
        return None

    @property
    def step_lines(self) -> List[LineBytes]:
        """The lines of what the step allocated (their bytes add up to its peak)."""
        return [line for line in self.lines if line.what not in RESIDENT]


def pool_stride(module: Any) -> int:
    """Height-times-width stride of a max or average pool (1 for anything else, an adaptive
    pool included: it pools to a fixed size, not by a factor)."""
    from torch.nn.modules.pooling import _AvgPoolNd, _MaxPoolNd

    if not isinstance(module, (_MaxPoolNd, _AvgPoolNd)):
        return 1
    stride = module.stride if module.stride is not None else module.kernel_size
    strides = list(stride) if isinstance(stride, (tuple, list)) else [stride] * 2
    product = 1
    for value in strides[-2:]:
        product *= int(value) if isinstance(value, int) and value > 0 else 1
    return product


def _owner_name(qualified: str) -> str:
    return qualified.rpartition(".")[0] or "(model)"


def _storage_nbytes(tensor: torch.Tensor, round_to: int) -> int:
    from .tracker import round_up

    return round_up(tensor.untyped_storage().nbytes(), round_to)


def _plain(value: Any) -> Any:
    if isinstance(value, (int, float, bool, str)) or value is None:
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, (int, float, bool)) for v in value):
        return list(value)
    return repr(type(value).__name__)


def storage_ids(tracker: Any, output: Any) -> Set[int]:
    """Tracked storage ids of the tensors in ``output``."""
    found = set()
    for leaf in tree_flatten(output)[0]:
        if isinstance(leaf, torch.Tensor):
            key = tracker.storage_key(leaf)
            if isinstance(key, int):
                found.add(key)
    return found
