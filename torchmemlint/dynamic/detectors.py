"""Findings from measurement: detectors over the ops a measured step ran.

Each detector reads the op trace of a ``lines.StepObserver`` (aten ops with their tensors'
storages, shapes and strides, which storages autograd saved and by which op) and reports the
same code as the static rule for the same anti-pattern, at the user's source line, with the
bytes it costs at the measured shape.  They see what ran, however it was spelled:

* TML601: a softmax whose input comes from a contraction of two activations (q.k), whose
  result (or its dropout) autograd keeps, and which is then contracted with another activation
  (v) along the softmax's own axis.  Bytes: the attention weights kept for backward (softmax
  output, dropout output and mask).
* TML201: an out-of-place LeakyReLU/ELU/CELU/SELU/RReLU whose input autograd keeps only for
  the activation itself and nothing reads afterwards, and whose output is kept by a later op:
  in place, the two would be one tensor.  Bytes: the input's storage.
* TML203: an in-place op that overwrites a tensor an earlier op saved for backward.  Plain
  autograd raises in backward ("modified by an inplace operation"); the measured step packs
  saved tensors through hooks, which skip that check, so it runs, and this says why it should
  not.  Bytes: the overwritten storage.
* TML204: a dropout mask drawn as floats (``bernoulli_`` on a floating tensor) that autograd
  keeps, when the step runs CUDA's kernels (there, out-of-place dropout keeps a 1-byte mask).
  Bytes: the mask's bytes beyond one byte per element.
* TML403: a BatchNorm whose running statistics are updated more than once in the step (a
  checkpointed segment recomputed in backward), at the user's call of ``checkpoint``.  Bytes:
  the running statistics updated twice.
* TML301: a strided max/average pool of the model that the step did not downsample with: the
  user's code replaced it by a module that keeps the resolution (``maxpool = nn.Identity()``),
  the forward skipped it, or the model kept the modules built before and after it but not it
  (``nn.Sequential(r.conv1, r.bn1, r.relu)`` and ``r.layer1``: reported where the stem was put
  together, with the line that ran it); and the modules registered after it ran on a tensor of the same
  height and width as the modules before it made (nothing else downsampled in between).  At the
  replacing line, else at the call of the first later module.  Bytes: what autograd keeps for
  the later modules' spatial tensors, times (1 - 1/stride): with the pool each would be
  1/stride of its size (the later modules only; a decoder after them is not counted).

``static_flags`` runs the linter over the same files to say which of them it found.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

from .lines import NO_SITE, OpRecord, StepObserver, TensorRef

SOFTMAX = {"_softmax", "softmax", "_safe_softmax"}
CONTRACTIONS = {"bmm", "mm", "baddbmm", "addmm", "matmul"}
# Ops that carry attention weights along elementwise (same element count, same layout).
CARRY = {
    "div", "mul", "add", "sub", "masked_fill", "where", "_to_copy", "clone", "contiguous", "copy",
    "native_dropout", "dropout", "_masked_scale", "to", "type_as", "detach", "alias", "expand",
    "view", "_unsafe_view", "reshape", "_reshape_alias", "permute", "transpose", "t", "unsqueeze",
    "squeeze", "select", "slice", "_efficientzerotensor", "neg", "exp", "tanh", "clamp",
}
LEAKY = {"leaky_relu", "elu", "rrelu_with_noise", "celu", "selu"}
BATCH_NORM = {"native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_functional",
              "cudnn_batch_norm", "miopen_batch_norm", "batch_norm", "_batch_norm_with_update"}
DEPTH = 6


@dataclass
class MeasuredFinding:
    code: str
    filename: str
    row: int
    bytes: int
    what: str
    static: Optional[bool] = None  # None: not checked
    ran_at: Optional[int] = None  # the line that ran it, when ``row`` is where its module was built

    def to_dict(self) -> Dict[str, Any]:
        return {"code": self.code, "filename": self.filename, "row": self.row, "bytes": self.bytes,
                "static": self.static, "what": self.what, "ran_at": self.ran_at}


class _Graph:
    def __init__(self, observer: StepObserver) -> None:
        self.obs = observer
        self.trace = [op for op in observer.trace if op.phase == "forward"]
        self.producer: Dict[Any, OpRecord] = {}
        self.readers: Dict[Any, List[Tuple[OpRecord, int]]] = {}
        for op in self.trace:
            input_ids = {ref.sid for ref in op.inputs if ref is not None}
            for position, ref in enumerate(op.inputs):
                if ref is not None:
                    self.readers.setdefault(ref.sid, []).append((op, position))
            for ref in op.outputs:
                if ref.sid not in input_ids and isinstance(ref.sid, int):
                    self.producer.setdefault(ref.sid, op)
        self.saved = {sid for sid in observer.saved_by}

    def saved_by_others(self, sid: Any, op: OpRecord) -> bool:
        return bool(self.obs.saved_by.get(sid, set()) - {op.index})

    def is_activation(self, ref: Optional[TensorRef]) -> bool:
        return ref is not None and ref.sid not in self.obs.param_ids

    def nbytes(self, sid: Any) -> int:
        return self.obs.nbytes.get(sid, 0) if isinstance(sid, int) else 0


def _tensor_inputs(op: OpRecord) -> List[Tuple[int, TensorRef]]:
    return [(i, ref) for i, ref in enumerate(op.inputs) if ref is not None]


def _contraction_operands(op: OpRecord) -> List[Tuple[TensorRef, int]]:
    """(operand, contracted dim) of a bmm/mm-like op."""
    tensors = [ref for _, ref in _tensor_inputs(op)]
    if op.name in ("baddbmm", "addmm"):
        tensors = tensors[1:3]
    if len(tensors) < 2:
        return []
    first, second = tensors[0], tensors[1]
    if len(first.shape) < 2 or len(second.shape) < 2:
        return []
    return [(first, len(first.shape) - 1), (second, len(second.shape) - 2)]


def _dim(value: Any, rank: int) -> Optional[int]:
    if not isinstance(value, int) or rank == 0:
        return None
    return value % rank


def _key_dims(ref: TensorRef, stride: int, size: int) -> List[int]:
    return [d for d in range(len(ref.shape)) if ref.shape[d] == size and ref.stride[d] == stride]


def eager_attention(graph: _Graph) -> Iterable[Tuple[OpRecord, int]]:
    for op in graph.trace:
        if op.name not in SOFTMAX or not op.inputs or op.inputs[0] is None or not op.outputs:
            continue
        source, probs = op.inputs[0], op.outputs[0]
        dim = _dim(op.args[1] if len(op.args) > 1 else None, len(probs.shape))
        if dim is None or probs.shape[dim] < 2:
            continue
        if not _from_qk(graph, source.sid):
            continue
        size = probs.shape[dim]
        # Storages carrying the weights, each with the element stride of the key axis.
        carried: Dict[Any, int] = {probs.sid: probs.stride[dim]}
        frontier = [probs.sid]
        contracted_with_v = False
        kept: Set[Any] = set()
        for _ in range(DEPTH):
            following = []
            for sid in frontier:
                for reader, position in graph.readers.get(sid, []):
                    if reader.index <= op.index:
                        continue
                    ref = reader.inputs[position]
                    dims = _key_dims(ref, carried[sid], size)
                    if reader.name in CONTRACTIONS:
                        for operand, contracted in _contraction_operands(reader):
                            if operand is ref and contracted in dims:
                                others = [o for o, _ in _contraction_operands(reader) if o is not ref]
                                if others and graph.is_activation(others[0]):
                                    contracted_with_v = True
                        continue
                    if reader.name not in CARRY or not dims:
                        continue
                    for out in reader.outputs:
                        if out.sid in carried or out.numel != ref.numel:
                            if reader.name in ("native_dropout",) and out.sid not in carried:
                                kept.add(out.sid) if out.sid in graph.saved else None
                            continue
                        if out.shape == ref.shape:
                            carried[out.sid] = out.stride[dims[0]]
                            following.append(out.sid)
            frontier = following
        if not contracted_with_v:
            continue
        kept |= {sid for sid in carried if sid in graph.saved}
        if kept:
            yield op, sum(graph.nbytes(sid) for sid in kept)


def _from_qk(graph: _Graph, sid: Any) -> bool:
    """Whether storage ``sid`` comes, through elementwise ops, from a contraction of two
    activations (neither a parameter)."""
    frontier = [sid]
    seen = set(frontier)
    for _ in range(DEPTH):
        following = []
        for current in frontier:
            producer = graph.producer.get(current)
            if producer is None:
                continue
            if producer.name in CONTRACTIONS:
                operands = _contraction_operands(producer)
                if operands and all(graph.is_activation(o) for o, _ in operands):
                    return True
                continue
            if producer.name not in CARRY:
                continue
            for _, ref in _tensor_inputs(producer):
                if ref.sid not in seen and ref.numel >= 2:
                    seen.add(ref.sid)
                    following.append(ref.sid)
        frontier = following
    return False


def missing_inplace(graph: _Graph) -> Iterable[Tuple[OpRecord, int]]:
    for op in graph.trace:
        if op.name not in LEAKY or not op.inputs or op.inputs[0] is None or not op.outputs:
            continue
        source, result = op.inputs[0], op.outputs[0]
        if not isinstance(source.sid, int) or source.sid == result.sid:
            continue
        if graph.nbytes(source.sid) == 0 or source.numel * source.itemsize < graph.nbytes(source.sid) - 511:
            continue  # a view of part of a larger storage
        if op.index not in graph.obs.saved_by.get(source.sid, set()):
            continue
        if graph.saved_by_others(source.sid, op) or source.sid in graph.obs.output_ids:
            continue
        later = [r for r, _ in graph.readers.get(source.sid, []) if r.index > op.index]
        if later:
            continue
        if not graph.saved_by_others(result.sid, op):
            continue
        yield op, graph.nbytes(source.sid)


def inplace_on_saved(graph: _Graph) -> Iterable[Tuple[OpRecord, int]]:
    """In-place ops that overwrite a tensor an earlier op saved for backward: autograd raises
    in backward (or would, if that op's backward ran)."""
    for op in graph.trace:
        for position in op.mutated:
            ref = op.inputs[position] if position < len(op.inputs) else None
            if ref is None or not isinstance(ref.sid, int):
                continue
            savers = graph.obs.saved_by.get(ref.sid, set())
            if any(index < op.index for index in savers):
                yield op, graph.nbytes(ref.sid)
                break


def float_dropout_mask(graph: _Graph) -> Iterable[Tuple[OpRecord, int]]:
    for op in graph.trace:
        if op.name not in ("bernoulli_", "bernoulli") or not op.outputs:
            continue
        mask = op.outputs[0]
        if not mask.floating or not isinstance(mask.sid, int):
            continue
        # The mask as drawn, or scaled by 1/(1-p) into a new tensor, kept by the multiply.
        masks, frontier = [mask], [mask]
        for _ in range(2):
            following = []
            for current in frontier:
                for reader, _ in graph.readers.get(current.sid, []):
                    if reader.index <= op.index or reader.name not in ("div", "mul", "_to_copy", "div_", "mul_"):
                        continue
                    if len(_tensor_inputs(reader)) != 1:
                        continue  # the multiply with the activation itself
                    following += [o for o in reader.outputs if o.floating and o.numel == mask.numel]
            masks += following
            frontier = following
        # Kept by an elementwise multiply with a tensor of its own size: a dropout mask (a
        # drop-path mask, one value per sample, broadcasts and is not one).
        kept = {m.sid: m for m in masks if m.sid in graph.saved and _multiplies_same_size(graph, m)}
        if kept:
            yield op, sum(max(graph.nbytes(sid) - m.numel, 0) for sid, m in kept.items())


def _multiplies_same_size(graph: _Graph, mask: TensorRef) -> bool:
    for reader, position in graph.readers.get(mask.sid, []):
        if reader.name not in ("mul", "mul_"):
            continue
        others = [ref for i, ref in _tensor_inputs(reader) if i != position]
        if others and others[0].numel == mask.numel:
            return True
    return False


def batchnorm_twice(observer: StepObserver) -> Iterable[Tuple[OpRecord, int]]:
    updates: Dict[Any, List[OpRecord]] = {}
    for op in observer.trace:
        if op.name not in BATCH_NORM or len(op.inputs) < 5:
            continue
        running = op.inputs[3]
        training = next((a for a in op.args[5:6] if isinstance(a, bool)), None)
        if running is None or training is False:
            continue
        updates.setdefault(running.sid, []).append(op)
    for sid, ops in updates.items():
        if len(ops) > 1:
            first = ops[0]
            running = first.inputs[3]
            var = first.inputs[4]
            nbytes = sum(r.numel * r.itemsize for r in (running, var) if r is not None)
            yield first, nbytes


def _inside(op: OpRecord, names: Iterable[str]) -> bool:
    return any(op.module == name or op.module.startswith(name + ".") for name in names)


def _spatial(ref: Optional[TensorRef]) -> Optional[Tuple[int, ...]]:
    return tuple(ref.shape[2:]) if ref is not None and len(ref.shape) >= 3 else None


def dropped_pool(graph: _Graph) -> Iterable[Tuple[Any, Optional[int], int, str]]:
    """(line, the row that ran it or None, bytes, what) of each strided pool the step ran past without downsampling."""
    obs = graph.obs
    for slot in getattr(obs, "pools", []):
        if slot.replaced_at is None and any(_inside(op, [slot.name]) for op in graph.trace):
            continue  # the pool ran
        later = [op for op in graph.trace if _inside(op, slot.after)]
        if not later:
            continue
        first = later[0]
        earlier = [op for op in graph.trace if op.index < first.index and _inside(op, slot.before)]
        fed = next((_spatial(ref) for _, ref in _tensor_inputs(first)
                    if graph.is_activation(ref) and _spatial(ref)), None)
        if not earlier or not earlier[-1].outputs or fed is None or fed != _spatial(earlier[-1].outputs[0]):
            continue  # not measurable, or something downsampled between
        indices = {op.index for op in later}
        refs = {ref.sid: ref for op in later for ref in op.inputs + op.outputs if ref is not None}
        kept = sum(graph.nbytes(sid) for sid, ref in refs.items()
                   if len(ref.shape) >= 3 and sid not in obs.param_ids and obs.saved_by.get(sid, set()) & indices)
        if not kept:
            continue
        ran_at = None
        if slot.replaced_at is not None:
            site = slot.replaced_at
            how = "`%s` replaced by %s" % (slot.name, slot.replacement)
        else:
            ran = min((called for name, called in slot.called.items() if called[0] != NO_SITE),
                      key=lambda called: called[1], default=None)
            if ran is None:
                continue
            site = ran[0]
            how = "`%s` not run" % slot.name
            if not slot.in_model:  # where the stem was put together without it
                how = "`%s` left out of the model" % slot.name
                if slot.kept_at is not None and slot.kept_at != NO_SITE:
                    site, ran_at = slot.kept_at, ran[0][1] if ran[0][0] == slot.kept_at[0] else None
        yield site, ran_at, kept * (slot.stride - 1) // slot.stride, (
            "%s: %s ran at the height and width of %s (%s)" % (
                how, first.module, earlier[-1].module, "x".join(map(str, fed))))


def detect(observer: StepObserver, cuda_kernels: bool = True) -> List[MeasuredFinding]:
    """The measured findings of one observed step, largest first."""
    graph = _Graph(observer)
    found: Dict[Tuple[str, str, int], MeasuredFinding] = {}

    def add(code: str, op: OpRecord, nbytes: int, what: str, site: Any = None) -> None:
        filename, row = site or op.site
        if (filename, row) == NO_SITE:
            return
        key = (code, filename, row)
        if key in found:
            found[key].bytes += nbytes
        else:
            ran_at = op.site[1] if site and tuple(site) != tuple(op.site) and site[0] == op.site[0] else None
            found[key] = MeasuredFinding(code, filename, row, nbytes, what, ran_at=ran_at)

    for op, nbytes in eager_attention(graph):
        add("TML601", op, nbytes, "attention weights kept for backward")
    for op, nbytes in inplace_on_saved(graph):
        add("TML203", op, nbytes, "%s overwrote a tensor autograd saved for backward" % op.name,
            observer.module_sites.get(op.module))
    for op, nbytes in missing_inplace(graph):
        # A module activation is reported where it was built: that is where the fix goes.
        add("TML201", op, nbytes, "%s input and output both kept" % op.name,
            observer.module_sites.get(op.module))
    if cuda_kernels:
        for op, nbytes in float_dropout_mask(graph):
            add("TML204", op, nbytes, "dropout mask kept as floats", observer.module_sites.get(op.module))
    for op, nbytes in batchnorm_twice(observer):
        add("TML403", op, nbytes, "BatchNorm running statistics updated twice", op.checkpoint_site)
    for (filename, row), ran_at, nbytes, what in dropped_pool(graph):
        if (filename, row) != NO_SITE and ("TML301", filename, row) not in found:
            found[("TML301", filename, row)] = MeasuredFinding("TML301", filename, row, nbytes, what, ran_at=ran_at)
    return sorted(found.values(), key=lambda f: (-f.bytes, f.filename, f.row, f.code))


# -- did the linter report it? --------------------------------------------------------------

def _functions(text: str) -> List[Tuple[int, int]]:
    """(first, last) lines of every function in ``text``."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    spans = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            spans.append((node.lineno, getattr(node, "end_lineno", node.lineno) or node.lineno))
    return spans


def _innermost(spans: List[Tuple[int, int]], row: int) -> Optional[Tuple[int, int]]:
    inside = [span for span in spans if span[0] <= row <= span[1]]
    return min(inside, key=lambda span: span[1] - span[0]) if inside else None


def static_flags(findings: List[MeasuredFinding], settings: Any = None) -> None:
    """Set each finding's ``static``: whether the linter, with every rule selected, reports the
    same code in the same function of the same file (or on the same line)."""
    import os
    from dataclasses import replace

    from torchmemlint.config import Settings
    from torchmemlint.engine import lint_source

    # Every rule, whatever the user's selection: the question is whether a rule knows it.
    chosen = replace(settings or Settings(), select=("ALL",), extend_select=(), ignore=(),
                     per_file_ignores=())
    by_file: Dict[str, Tuple[List[Any], List[Tuple[int, int]]]] = {}
    for finding in findings:
        if finding.filename not in by_file:
            try:
                with open(finding.filename, encoding="utf-8") as handle:
                    text = handle.read()
            except OSError:
                by_file[finding.filename] = ([], [])
                continue
            lint = lint_source(text, os.path.abspath(finding.filename), chosen, ignore_noqa=True)
            by_file[finding.filename] = (lint, _functions(text))
        lint, spans = by_file[finding.filename]
        scope = _innermost(spans, finding.row)
        finding.static = False
        for static in lint:
            if static.code != finding.code:
                continue
            first, last = static.location.row, static.end_location.row
            rows = [finding.row] + ([finding.ran_at] if finding.ran_at else [])
            if any(first <= row <= last for row in rows) or (
                scope is not None and _innermost(spans, first) == scope
            ):
                finding.static = True
                break
