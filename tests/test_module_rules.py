"""Module-structure rules (TML1xx, TML2xx, TML3xx) on the fixtures in fixtures/lint/modules.

The CLI runs as a subprocess and must report exactly the rows marked ``# expect: CODE``. Fixes
are proven with torch: a fixture is executed before and after the engine's fixer, models are
built with the same seed, and one forward and backward pass must give the same outputs and
gradients (bit for bit for safe fixes).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path
from typing import List, Set, Tuple

import pytest
import torch

from torchmemlint.config import Settings
from torchmemlint.engine import lint_source
from torchmemlint.findings import Applicability
from torchmemlint.fixer import fix_text
from torchmemlint.rules import all_rules

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "lint" / "modules"
FAMILIES = ("TML1", "TML2", "TML3")
MARKER = re.compile(r"#\s*expect:\s*(TML\d{3}(?:\s*,\s*TML\d{3})*)")


# -- the CLI on the fixtures -----------------------------------------------------------------
def marked(codes: Set[str]) -> Set[Tuple[str, int, str]]:
    found = set()
    for path in sorted(FIXTURES.glob("*.py")):
        for row, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            match = MARKER.search(line)
            if match:
                for code in re.split(r"\s*,\s*", match.group(1)):
                    if code in codes:
                        found.add((path.name, row, code))
    return found


def cli(*args: str) -> List[dict]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    result = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "check", "--isolated", "--output-format", "json", *args],
        cwd=ROOT, capture_output=True, text=True, env=env, timeout=120,
    )
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout)


def family_codes(default_only: bool) -> Set[str]:
    return {
        code
        for code, rule in all_rules().items()
        if code.startswith(FAMILIES) and (rule.default_enabled or not default_only)
    }


@pytest.mark.slow
def test_cli_reports_exactly_the_marked_rows_when_the_families_are_selected():
    findings = cli("--select", ",".join(FAMILIES), str(FIXTURES))
    reported = {(Path(f["filename"]).name, f["location"]["row"], f["code"]) for f in findings}
    assert reported == marked(family_codes(default_only=False))


@pytest.mark.slow
def test_cli_default_rules_report_only_the_rules_that_are_on_by_default():
    findings = cli(str(FIXTURES))  # every rule that is on by default, other families included
    reported = {
        (Path(f["filename"]).name, f["location"]["row"], f["code"])
        for f in findings
        if f["code"].startswith(FAMILIES)
    }
    expected = marked(family_codes(default_only=True))
    assert {"TML201", "TML203", "TML204", "TML301"} <= {code for _, _, code in expected}
    assert reported == expected
    assert not {code for _, _, code in reported} & {"TML101", "TML202"}


@pytest.mark.slow
def test_lookalikes_are_never_reported():
    assert cli("--select", ",".join(FAMILIES), str(FIXTURES / "lookalikes.py")) == []


# -- executing fixtures before and after fixing ----------------------------------------------
def load(source: str, name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    exec(compile(source, f"<{name}>", "exec"), module.__dict__)
    return module


def fixed_source(source: str, codes: Tuple[str, ...], unsafe: bool) -> Tuple[str, list]:
    settings = Settings(select=codes)
    result = fix_text(source, lambda text: lint_source(text, "fixture.py", settings), unsafe)
    return result.text, result.fixed


def step(module: types.ModuleType, name: str, shape: Tuple[int, ...]):
    """One training step with fixed seeds: output, input grad, parameter grads, caller's input."""
    torch.manual_seed(0)
    model = getattr(module, name)()
    model.train()
    generator = torch.Generator().manual_seed(1)
    base = torch.randn(shape, generator=generator).requires_grad_(True)
    given = base * 1.0  # what the caller passes (not a leaf, so in place on it does not raise)
    torch.manual_seed(2)  # dropout and RReLU draw from here
    out = model(given)
    out.pow(2).sum().backward()
    grads = {key: p.grad for key, p in model.named_parameters()}
    return out.detach(), base.grad, grads, given.detach()


def assert_same(first, second, exact: bool = True) -> None:
    """Same output, input gradient and parameter gradients (exactly, or to the last bits)."""
    pairs = [(first[0], second[0]), (first[1], second[1])]
    assert first[2].keys() == second[2].keys()
    pairs += [(first[2][key], second[2][key]) for key in first[2]]
    largest = max(float(a.abs().max()) for a, _ in pairs if a is not None)
    for a, b in pairs:
        assert (a is None) == (b is None)
        if a is None:
            continue
        if exact:
            assert torch.equal(a, b)
        else:  # ELU/CELU/SELU in place compute backward from the result: last-bit differences
            torch.testing.assert_close(a, b, rtol=0, atol=1e-6 * largest)


@pytest.mark.slow
@pytest.mark.parametrize("fixture", ["inplace_blocks.py", "stateless_nets.py"])
def test_safe_fixes_keep_outputs_and_gradients_identical(fixture):
    source = (FIXTURES / fixture).read_text(encoding="utf-8")
    fixed, applied = fixed_source(source, FAMILIES, unsafe=False)
    assert applied and all(f.fix.applicability is Applicability.SAFE for f in applied)
    original, after = load(source, "original"), load(fixed, "fixed")
    raising = getattr(original, "RAISE_IN_BACKWARD", set())
    for name, shape in original.INPUTS.items():
        if name in raising:
            with pytest.raises(RuntimeError, match="modified by an inplace operation"):
                step(original, name, shape)
            torch.manual_seed(0)
            model = getattr(original, name)()
            torch.manual_seed(2)
            before = model(torch.randn(shape, generator=torch.Generator().manual_seed(1)))
            now = step(after, name, shape)
            assert torch.equal(before.detach(), now[0])  # same forward; backward now runs
        else:
            assert_same(step(original, name, shape), step(after, name, shape))


@pytest.mark.slow
def test_unsafe_tml101_fix_keeps_numerics_and_removes_the_modules():
    source = (FIXTURES / "stateless_nets.py").read_text(encoding="utf-8")
    fixed, applied = fixed_source(source, ("TML101",), unsafe=True)
    assert len(applied) == 3
    assert "nn.MaxPool2d" not in fixed and "F.max_pool2d(" in fixed
    assert "training=self.training" in fixed
    original, after = load(source, "original"), load(fixed, "fixed")
    assert_same(step(original, "ModulePoolNet", (1, 3, 32, 44)), step(after, "ModulePoolNet", (1, 3, 32, 44)))
    assert not any(isinstance(m, torch.nn.MaxPool2d) for m in after.ModulePoolNet().modules())


ACTIVATION_NET = """\
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.{layer}, nn.Conv2d(8, 4, 3)
        )

    def forward(self, x):
        return self.body(x)
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    "layer, code, exact",
    [
        ("ReLU()", "TML202", True),
        ("ReLU6()", "TML202", True),
        ("Hardtanh(-0.5, 0.5)", "TML202", True),
        ("SiLU()", "TML202", True),
        ("Hardswish()", "TML202", True),
        ("Hardsigmoid()", "TML202", True),
        ("Mish()", "TML202", True),
        ("LeakyReLU(0.1)", "TML201", True),
        ("RReLU()", "TML201", True),
        ("ELU()", "TML201", False),
        ("CELU(0.5)", "TML201", False),
        ("SELU()", "TML201", False),
    ],
)
def test_adding_inplace_is_exact_where_the_fix_is_safe(layer, code, exact):
    source = ACTIVATION_NET.format(layer=layer)
    findings = lint_source(source, "net.py", Settings(select=("TML2",)))
    assert [f.code for f in findings] == [code]
    expected = Applicability.SAFE if exact else Applicability.UNSAFE
    assert findings[0].fix is not None and findings[0].fix.applicability is expected
    fixed, applied = fixed_source(source, (code,), unsafe=True)
    assert len(applied) == 1 and "inplace=True" in fixed
    assert_same(step(load(source, "a"), "Net", (2, 3, 12, 12)), step(load(fixed, "b"), "Net", (2, 3, 12, 12)), exact)


DROPOUT_NET = """\
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Sequential(nn.Linear(16, 32), nn.Dropout(0.5, inplace=True), nn.Linear(32, 4))

    def forward(self, x):
        return self.head(x)
"""


@pytest.mark.slow
def test_inplace_dropout_fix_draws_the_same_mask_on_cpu():
    findings = lint_source(DROPOUT_NET, "net.py", Settings(select=("TML204",)))
    assert [f.code for f in findings] == ["TML204"]
    assert findings[0].fix is not None and findings[0].fix.applicability is Applicability.UNSAFE
    fixed, _ = fixed_source(DROPOUT_NET, ("TML204",), unsafe=True)
    assert "inplace" not in fixed
    assert_same(step(load(DROPOUT_NET, "a"), "Net", (4, 16)), step(load(fixed, "b"), "Net", (4, 16)))


def _saved_bytes_of_dropout(p: float) -> int:
    """Bytes autograd keeps for an in-place dropout in training (mask included)."""
    saved: List[int] = []

    def pack(tensor):
        saved.append(tensor.numel() * tensor.element_size())
        return tensor

    x = torch.randn(4, 64, requires_grad=True) * 1.0  # a non-leaf, so in place is allowed
    drop = torch.nn.Dropout(p, inplace=True).train()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        drop(x)
    return sum(saved)


def test_inplace_dropout_at_p_zero_keeps_no_mask_and_is_not_reported():
    # The reason TML204 is quiet at p = 0: no mask is drawn or kept, in place or not.
    assert _saved_bytes_of_dropout(0.0) == 0
    assert _saved_bytes_of_dropout(0.1) > 0
    quiet = DROPOUT_NET.replace("nn.Dropout(0.5, inplace=True)", "nn.Dropout(p=0.0, inplace=True)")
    assert lint_source(quiet, "net.py", Settings(select=("TML204",))) == []
    factory = DROPOUT_NET.replace("def __init__(self):", "def __init__(self, drop=0.0):").replace(
        "nn.Dropout(0.5, inplace=True)", "nn.Dropout(drop, inplace=True)"
    )
    assert lint_source(factory + "\nnet = Net()\n", "net.py", Settings(select=("TML204",))) == []
    passed = factory + "\nnet = Net(drop=0.2)\n"
    assert [f.code for f in lint_source(passed, "net.py", Settings(select=("TML204",)))] == ["TML204"]
    # a class its file never builds keeps its default: p = 0 draws no mask (a library's Encoder)
    assert lint_source(factory, "net.py", Settings(select=("TML204",))) == []
    dropping = factory.replace("def __init__(self, drop=0.0):", "def __init__(self, drop=0.1):")
    assert [f.code for f in lint_source(dropping, "net.py", Settings(select=("TML204",)))] == ["TML204"]


RELU_THEN_DROPOUT = """
import torch.nn as nn


class Head(nn.Module):
    def __init__(self, dim, dropout=0.0):
        super().__init__()
        self.main = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Dropout(dropout, inplace=True), nn.Linear(dim, 2))

    def forward(self, x):
        return self.main(x)
"""


@pytest.mark.slow
def test_inplace_dropout_after_relu_breaks_backward_only_when_it_drops():
    """TML203 on an in-place dropout over ReLU's saved output: backward raises at p > 0; at
    p = 0 nothing is overwritten and backward runs, so a dropout every call leaves at 0 is quiet."""
    for p, raises in ((0.1, True), (0.0, False)):
        model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Dropout(p, inplace=True)).train()
        try:
            model(torch.randn(3, 4)).sum().backward()
            raised = False
        except RuntimeError as error:
            raised = "modified by an inplace operation" in str(error)
        assert raised is raises
    codes = ("TML203",)
    assert lint_source(RELU_THEN_DROPOUT + "\nhead = Head(8)\n", "h.py", Settings(select=codes)) == []
    dropping = RELU_THEN_DROPOUT + "\nhead = Head(8, dropout=0.1)\n"
    assert [f.code for f in lint_source(dropping, "h.py", Settings(select=codes))] == ["TML203"]
    literal = RELU_THEN_DROPOUT.replace("nn.Dropout(dropout, inplace=True)", "nn.Dropout(0.2, inplace=True)")
    assert [f.code for f in lint_source(literal, "h.py", Settings(select=codes))] == ["TML203"]


LEAKY_BEFORE = """
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, c, p=0.0):
        super().__init__()
        self.into_dropout = nn.Sequential(nn.Conv2d(c, c, 3), nn.LeakyReLU(0.2), nn.Dropout2d(0.5), nn.Conv2d(c, c, 3))
        self.into_conv = nn.Sequential(nn.Conv2d(c, c, 3), nn.LeakyReLU(0.2), nn.Conv2d(c, c, 3))
        self.maybe_dropout = nn.Sequential(
            nn.Conv2d(c, c, 3), nn.LeakyReLU(0.2), *([nn.Dropout(p)] if p else []), nn.Conv2d(c, c, 3)
        )
        self.last = nn.Sequential(nn.Conv2d(c, c, 3), nn.ELU())
        # p = 0 keeps the layer's input as its output: the conv after keeps the ELU's output
        self.never_drops = nn.Sequential(nn.Conv2d(c, c, 3), nn.ELU(), nn.Dropout(0.0), nn.Conv2d(c, c, 3))

    def forward(self, x):
        return self.never_drops(self.last(self.maybe_dropout(self.into_conv(self.into_dropout(x)))))
"""


def _saved_bytes(layers, shape=(2, 4, 16, 16)) -> int:
    stored = {}

    def pack(tensor):
        stored[tensor.untyped_storage().data_ptr()] = tensor.untyped_storage().nbytes()
        return tensor

    model = torch.nn.Sequential(*layers).train()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(torch.randn(*shape))
    return sum(stored.values())


@pytest.mark.slow
def test_an_activation_whose_next_layer_is_a_dropout_saves_nothing_in_place():
    """A dropout keeps only its mask: out of place the activation keeps its input, in place its
    result, one tensor either way (TML201 claims two out of place)."""
    def layers(inplace, dropout):
        torch.manual_seed(0)
        middle = [torch.nn.Dropout2d(0.5)] if dropout else []
        conv = torch.nn.Conv2d(4, 4, 3, padding=1)
        return [conv, torch.nn.LeakyReLU(0.2, inplace=inplace), *middle, torch.nn.Conv2d(4, 4, 3, padding=1)]

    assert _saved_bytes(layers(False, True)) == _saved_bytes(layers(True, True))
    assert _saved_bytes(layers(False, False)) > _saved_bytes(layers(True, False))
    rows = sorted(f.location.row for f in lint_source(LEAKY_BEFORE, "b.py", Settings(select=("TML201",))))
    # into_conv, maybe_dropout (a conv may follow), last (what follows is not known here) and
    # never_drops (a dropout with p = 0 passes its input on)
    assert rows == [9, 11, 13, 15]


class _KeepWhere(torch.nn.Module):
    """``torch.where(keep, x, -9e15)`` of a fixed condition (pyGAT's adjacency mask)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("keep", torch.rand(16, 16) > 0.5)

    def forward(self, x):
        return torch.where(self.keep, x, torch.full_like(x, -9e15))


@pytest.mark.slow
def test_an_activation_read_only_by_a_softmax_or_a_where_saves_nothing_in_place():
    """A softmax keeps its own output and ``torch.where`` only its condition: out of place the
    activation keeps its input, in place its result, one tensor either way, as before a dropout
    (TML201 stays quiet there: tests/test_inplace_dropout_after.py)."""
    def layers(inplace, after):
        torch.manual_seed(0)
        return [torch.nn.Conv2d(4, 4, 3, padding=1), torch.nn.LeakyReLU(0.2, inplace=inplace), after]

    for after in (torch.nn.Softmax(dim=-1), _KeepWhere()):
        assert _saved_bytes(layers(False, after)) == _saved_bytes(layers(True, after)), after
    conv = torch.nn.Conv2d(4, 4, 3, padding=1)
    assert _saved_bytes(layers(False, conv)) > _saved_bytes(layers(True, conv))


class _AddOne(torch.nn.Module):
    """``x + 1`` (a linear attention's feature map ``elu(q) + 1``)."""

    def forward(self, x):
        return x + 1.0


@pytest.mark.slow
def test_an_activation_read_only_by_an_addition_saves_nothing_in_place():
    """An addition's backward reads neither term: out of place the activation keeps its input,
    in place its result, one tensor either way, and the sum is a new tensor (TML201 stays quiet
    there: tests/test_inplace_dropout_after.py); a conv after it keeps a second one."""
    def layers(inplace, after):
        torch.manual_seed(0)
        return [torch.nn.Conv2d(4, 4, 3, padding=1), torch.nn.ELU(inplace=inplace), *after]

    conv = torch.nn.Conv2d(4, 4, 3, padding=1)
    assert _saved_bytes(layers(False, [_AddOne()])) == _saved_bytes(layers(True, [_AddOne()]))
    assert _saved_bytes(layers(False, [_AddOne(), conv])) == _saved_bytes(layers(True, [_AddOne(), conv]))
    assert _saved_bytes(layers(False, [conv])) > _saved_bytes(layers(True, [conv]))


class _ReflectPadConv(torch.nn.Module):
    """EnCodec's ``EncodecConv1d``: the input padded first (``pad_mode="reflect"``, the default),
    then convolved."""

    def __init__(self, mode):
        super().__init__()
        self.mode = mode
        self.conv = torch.nn.Conv1d(4, 4, 3)

    def forward(self, x):
        return self.conv(torch.nn.functional.pad(x, (2, 2), mode=self.mode))


@pytest.mark.slow
def test_an_activation_before_a_padded_conv_saves_in_place_only_when_the_pad_keeps_its_input():
    """A reflection (or replication) pad keeps its input for backward, so the layer after the
    activation keeps its result and in place saves one tensor; a constant pad keeps nothing, the
    conv keeps the padded copy, and in place saves nothing."""
    def layers(inplace, mode):
        torch.manual_seed(0)
        return [torch.nn.Conv1d(4, 4, 3, padding=1), torch.nn.ELU(inplace=inplace), _ReflectPadConv(mode)]

    for mode in ("reflect", "replicate"):
        assert _saved_bytes(layers(False, mode), (2, 4, 16)) > _saved_bytes(layers(True, mode), (2, 4, 16))
    assert _saved_bytes(layers(False, "constant"), (2, 4, 16)) == _saved_bytes(layers(True, "constant"), (2, 4, 16))


# -- what the unsafe in-place findings prevent ---------------------------------------------------
@pytest.fixture(scope="module")
def blocks():
    return load((FIXTURES / "inplace_blocks.py").read_text(encoding="utf-8"), "blocks")


SPLICED_RELU_BLOCK = 'import torch.nn as nn\n\nclass Block(nn.Module):\n    def __init__(self, c):\n        super().__init__()\n        self.relu = nn.ReLU(inplace=True)\n        rep = []\n        rep.append(self.relu)\n        rep.append(nn.Conv2d(c, c, 3, padding=1))\n        rep.append(nn.BatchNorm2d(c))\n        self.rep = nn.Sequential(*rep)\n\n    def forward(self, inp):\n        x = self.rep(inp)\n        skip = inp\n        x += skip\n        return x\n'


@pytest.mark.slow
def test_inplace_relu_spliced_first_before_a_shortcut_changes_the_result():
    # Xception style: `rep.append(self.relu)` first, then `x += skip` with `skip = inp`.
    source = SPLICED_RELU_BLOCK
    findings = lint_source(source, "b.py", Settings(select=("TML203",)))
    assert [(f.code, f.location.row) for f in findings] == [("TML203", 14)]
    fixed, _ = fixed_source(source, ("TML203",), unsafe=True)
    assert "inplace" not in fixed
    make = "\nclass Net(Block):\n    def __init__(self):\n        super().__init__(4)\n"
    broken = step(load(source + make, "spliced_a"), "Net", (2, 4, 6, 6))
    correct = step(load(fixed + make, "spliced_b"), "Net", (2, 4, 6, 6))
    assert float((broken[0] - correct[0]).abs().max()) > 0.1


@pytest.mark.slow
def test_inplace_after_sigmoid_raises_in_backward(blocks):
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        step(blocks, "GatedHead", (2, 8, 8, 8))


@pytest.mark.slow
def test_inplace_before_a_residual_silently_changes_the_result(blocks):
    source = (FIXTURES / "inplace_blocks.py").read_text(encoding="utf-8")
    findings = [f for f in lint_source(source, "b.py", Settings(select=("TML203",))) if f.location.row == 130]
    assert findings and findings[0].fix.applicability is Applicability.UNSAFE
    fixed = load(fixed_source(source, ("TML203",), unsafe=True)[0], "fixed")
    torch.manual_seed(0)
    model = blocks.ResidualOverwrite()
    x = torch.randn(2, 8, 8, 8)
    y = model.bn(model.conv(x))
    intended = model.conv2(torch.relu(y)) + y  # what the code says
    buggy = model(x)  # no error: the shortcut silently holds relu(y)
    assert not torch.allclose(buggy, intended)
    torch.manual_seed(0)
    assert torch.equal(fixed.ResidualOverwrite()(x), intended)


@pytest.mark.slow
def test_inplace_on_forwards_argument_changes_the_callers_tensor(blocks):
    source = (FIXTURES / "inplace_blocks.py").read_text(encoding="utf-8")
    fixed = load(fixed_source(source, ("TML203",), unsafe=False)[0], "fixed")
    before, after = step(blocks, "PreActivation", (2, 8, 8, 8)), step(fixed, "PreActivation", (2, 8, 8, 8))
    assert_same(before, after)
    passed = torch.randn((2, 8, 8, 8), generator=torch.Generator().manual_seed(1))
    assert not torch.equal(before[3], passed) and torch.equal(after[3], passed)


# -- the look-alike and shared-ReLU cases, through the engine ------------------------------------
def test_torchvision_style_shared_relu_gives_no_inplace_finding():
    source = (FIXTURES / "inplace_blocks.py").read_text(encoding="utf-8")
    block = source[source.index("class BasicBlock"):source.index("class LeakyConvBlock")]
    header = "import torch\nimport torch.nn as nn\n\n"
    assert lint_source(header + block, "resnet.py", Settings(select=("TML2",))) == []


def test_reassignment_before_a_read_is_not_a_later_use():
    source = (
        "import torch.nn.functional as F\n\n"
        "def f(w1, w2, x):\n"
        "    x = F.conv2d(x, w1)\n"
        "    x = F.leaky_relu(x)\n"
        "    x = F.conv2d(x, w2)\n"
        "    return x\n"
    )
    findings = lint_source(source, "f.py", Settings(select=("TML201",)))
    assert [(f.code, f.location.row) for f in findings] == [("TML201", 5)]
    kept = source.replace("    x = F.leaky_relu(x)\n", "    skip = x\n    x = F.leaky_relu(x)\n")
    assert lint_source(kept.replace("return x\n", "return x + skip\n"), "f.py", Settings(select=("TML201",))) == []


def test_loop_carried_value_is_a_later_use():
    source = (
        "import torch.nn.functional as F\n\n"
        "def f(w, x):\n"
        "    y = F.conv2d(x, w)\n"
        "    outs = []\n"
        "    for _ in range(3):\n"
        "        outs.append(F.relu(y, inplace=True))\n"
        "    return outs\n"
    )
    findings = lint_source(source, "f.py", Settings(select=("TML203",)))
    assert [(f.code, f.location.row) for f in findings] == [("TML203", 7)]
    assert "read again" in findings[0].message


@pytest.mark.parametrize(
    "body, reported",
    [
        # the list keeps the tensor that is then overwritten
        ("    feats = [x]\n    y = F.relu(x, inplace=True)\n    return y, feats\n", True),
        ("    feats = []\n    feats.append(x)\n    y = F.relu(x, inplace=True)\n    return y, feats\n", True),
        # `x` is rebound before the in-place call: the list holds the old tensor
        ("    feats = [x]\n    x = F.conv2d(x, w)\n    x = F.relu(x, inplace=True)\n    return x, feats\n", False),
        # read in a handler of the same try: may run after the call
        (
            "    try:\n        y = F.relu(x, inplace=True)\n    except RuntimeError:\n"
            "        y = x * 2\n    return y\n",
            True,
        ),
        # read only before the call
        ("    s = x.sum()\n    y = F.relu(x, inplace=True)\n    return y, s\n", False),
    ],
)
def test_tensors_kept_elsewhere_count_as_read_again(body, reported):
    source = "import torch.nn.functional as F\n\ndef f(w, x):\n    x = F.conv2d(x, w)\n" + body
    findings = lint_source(source, "f.py", Settings(select=("TML203",)))
    assert bool(findings) is reported, [f.message for f in findings]
