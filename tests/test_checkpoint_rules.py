"""TML4xx beyond the inline examples: the CLI on the fixtures, fixes proven by running the
fixed models with torch, and the bugs the rule messages describe, reproduced.

Fixtures live in fixtures/lint/checkpoint/; each marks the rows where a finding starts with
``# expect: CODE[, CODE]`` and the runnable ones define ``build()`` (name -> model) and
``example_inputs()``.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import types
import warnings
from pathlib import Path
from typing import Dict, Optional, Set, Tuple

import pytest
import torch

from torchmemlint.config import Settings
from torchmemlint.engine import lint_source
from torchmemlint.fixer import fix_text

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "lint" / "checkpoint"
EXPECT = re.compile(r"#\s*expect:\s*(TML\d{3}(?:\s*,\s*TML\d{3})*)")


def expected_findings() -> Set[Tuple[str, int, str]]:
    found = set()
    for path in sorted(FIXTURES.glob("*.py")):
        for row, line in enumerate(path.read_text().splitlines(), start=1):
            match = EXPECT.search(line)
            if match:
                found.update((path.name, row, code.strip()) for code in match.group(1).split(","))
    return found


def run_cli(*args: str, cwd: Optional[Path] = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "torchmemlint", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )


def reported(result: subprocess.CompletedProcess) -> Set[Tuple[str, int, str]]:
    assert result.returncode in (0, 1), result.stderr
    return {
        (Path(item["filename"]).name, item["location"]["row"], item["code"])
        for item in json.loads(result.stdout)
        if item["code"].startswith("TML4")
    }


def fixed(source: str, select: str, unsafe_fixes: bool = False) -> str:
    """The source after the fixer applied the selected rules' fixes (as `--fix` does)."""
    settings = Settings(select=(select,))
    return fix_text(
        source, lambda text: lint_source(text, "fixture.py", settings), unsafe_fixes
    ).text


def fixture_source(name: str) -> str:
    return (FIXTURES / name).read_text()


# -- running fixture models --------------------------------------------------------------
@pytest.fixture(autouse=True, scope="module")
def single_thread():
    """The models are tiny: one thread is much faster than several on a busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


Step = Dict[str, object]


def load(source: str, **replacements: object) -> Dict[str, object]:
    """Execute a fixture's source in a fresh namespace; ``replacements`` override globals."""
    namespace: Dict[str, object] = {"__name__": "fixture_under_test"}
    exec(compile(source, "fixture_under_test.py", "exec"), namespace)
    namespace.update(replacements)
    return namespace


def train_step(namespace: Dict[str, object], seed: int = 0) -> Dict[str, Step]:
    """One forward+backward of every model ``build()`` returns, from the same seed."""
    torch.manual_seed(seed)
    models = namespace["build"]()
    steps = {}
    for name, model in models.items():
        torch.manual_seed(seed + 1)
        inputs = [
            tensor.detach().clone().requires_grad_(tensor.requires_grad)
            for tensor in namespace["example_inputs"]()
        ]
        model.train()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # reentrant-default and "no input requires grad"
            output = model(*inputs)
            output.pow(2).mean().backward()
        steps[name] = {
            "model": model,
            "output": output.detach(),
            # checkpoint_wrapper's own prefix left out, as its state_dict hooks do
            "grads": {
                key.replace("_checkpoint_wrapped_module.", ""): param.grad
                for key, param in model.named_parameters()
            },
            "input_grads": [tensor.grad for tensor in inputs],
            "next_random": torch.rand(1),  # where the global generator stands after the step
        }
    return steps


def assert_identical(first: Dict[str, Step], second: Dict[str, Step]) -> None:
    assert first.keys() == second.keys()
    for name in first:
        a, b = first[name], second[name]
        assert torch.equal(a["output"], b["output"]), name
        assert a["grads"].keys() == b["grads"].keys()
        for key, grad in a["grads"].items():
            other = b["grads"][key]
            assert (grad is None) == (other is None), f"{name}.{key}: None vs tensor"
            assert grad is None or torch.equal(grad, other), f"{name}.{key} differs"
        for grad, other in zip(a["input_grads"], b["input_grads"]):
            assert (grad is None) == (other is None)
            assert grad is None or torch.equal(grad, other)


def max_grad_difference(first: Step, second: Step) -> float:
    return max(
        (a - second["grads"][key]).abs().max().item()
        for key, a in first["grads"].items()
        if a is not None
    )


def without_checkpoint(function, *args, use_reentrant=None, preserve_rng_state=True, **kwargs):
    """Stands in for ``torch.utils.checkpoint.checkpoint``: the model without checkpointing."""
    return function(*args, **kwargs)


def sequential_without_checkpoint(functions, segments, input, use_reentrant=None, **kwargs):
    return functions(input)


# -- the CLI on the fixtures ---------------------------------------------------------------
@pytest.mark.slow
def test_cli_reports_exactly_the_marked_rows():
    expected = expected_findings()
    assert {code for _, _, code in expected} == {"TML401", "TML402", "TML403", "TML404", "TML405"}
    result = run_cli("--isolated", "--select", "TML4", "--output-format", "json", str(FIXTURES))
    assert result.returncode == 1
    assert reported(result) == expected


@pytest.mark.slow
def test_default_selection_leaves_the_deep_stack_suggestion_off():
    result = run_cli("--isolated", "--output-format", "json", str(FIXTURES))
    expected = {item for item in expected_findings() if item[2] != "TML405"}
    assert reported(result) == expected


@pytest.mark.slow
@pytest.mark.parametrize(
    "minimum, classes",
    [(13, set()), (2, {"Encoder", "SmallResNet", "PlainStack", "ShallowStack", "HelperEncoder"})],
)
def test_checkpoint_min_blocks_option_from_pyproject(tmp_path, minimum, classes):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.torchmemlint]\nselect = ["TML405"]\n\n'
        f"[tool.torchmemlint.options]\ncheckpoint-min-blocks = {minimum}\n"
    )
    shutil.copy(FIXTURES / "deep_stacks.py", tmp_path / "deep_stacks.py")
    result = run_cli("--output-format", "json", "deep_stacks.py", cwd=tmp_path)
    lines = (tmp_path / "deep_stacks.py").read_text().splitlines()
    flagged = set()
    for _, row, _ in reported(result):
        owner = next(line for line in reversed(lines[:row]) if line.startswith("class "))
        flagged.add(owner.split()[1].split("(")[0])
    assert flagged == classes


# -- safe fixes keep outputs and gradients identical -----------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize(
    "fixture", ["single_ops_non_reentrant.py", "dropout_rng.py", "module_wrappers.py"]
)
def test_safe_fixes_keep_outputs_and_gradients_identical(fixture):
    original = fixture_source(fixture)
    after = fixed(original, "TML4")
    assert after != original
    remaining = lint_source(after, fixture, Settings(select=("TML4",)))
    assert not [f for f in remaining if f.fix is not None and f.fix.is_safe]
    assert_identical(train_step(load(original)), train_step(load(after)))


def test_single_op_safe_fix_unwraps_every_call():
    original = (FIXTURES / "single_ops_non_reentrant.py").read_text()
    findings = lint_source(original, "f.py", Settings(select=("TML402",)))
    assert len(findings) == 7 and all(f.fix is not None and f.fix.is_safe for f in findings)


@pytest.mark.slow
def test_use_reentrant_false_gives_identical_gradients_when_inputs_require_grad():
    original = fixture_source("single_convs_reentrant.py")
    after_fix = fixed(original, "TML401", unsafe_fixes=True)
    assert after_fix.count("use_reentrant=False") == 3
    before, after = train_step(load(original)), train_step(load(after_fix))
    # Segment inputs come out of trained layers: both variants compute the same gradients.
    assert_identical(
        {name: before[name] for name in ("stem_then_convs", "residual")},
        {name: after[name] for name in ("stem_then_convs", "residual")},
    )


@pytest.mark.slow
def test_use_reentrant_false_changes_gradients_when_no_input_requires_grad():
    """Why TML401's fix is unsafe: on the image batch it gives conv1 the gradient it lacked."""
    source = fixture_source("single_convs_reentrant.py").replace(", use_reentrant=True", "")
    before = train_step(load(source))["first_conv"]["grads"]
    after = train_step(load(fixed(source, "TML401", unsafe_fixes=True)))["first_conv"]["grads"]
    assert before["conv1.weight"] is None and after["conv1.weight"] is not None


# -- the bugs the messages describe ---------------------------------------------------------
@pytest.mark.slow
def test_reentrant_checkpoint_of_the_first_conv_leaves_it_untrained():
    source = fixture_source("single_convs_reentrant.py")
    grads = train_step(load(source))["first_conv"]["grads"]
    assert grads["conv1.weight"] is None and grads["conv1.bias"] is None
    assert grads["conv2.weight"] is not None
    # TML402's message says so, and its (unsafe) unwrap gives conv1 its gradient back.
    messages = [
        f.message
        for f in lint_source(source, "f.py", Settings(select=("TML402",)))
        if "images" in f.message
    ]
    assert messages and "`images`, the argument of `forward`" in messages[0]
    unwrapped = fixed(source, "TML402", unsafe_fixes=True)
    assert train_step(load(unwrapped))["first_conv"]["grads"]["conv1.weight"] is not None


@pytest.mark.slow
def test_batchnorm_in_checkpoint_updates_running_statistics_twice():
    source = fixture_source("batchnorm_segments.py")
    checkpointed = train_step(load(source))["net"]
    reference = train_step(
        load(
            source,
            checkpoint=without_checkpoint,
            checkpoint_sequential=sequential_without_checkpoint,
        )
    )["net"]
    for name in ("stage.blocks.0.bn", "stage.blocks.1.bn", "tail.1"):
        bn = checkpointed["model"].get_submodule(name)
        plain = reference["model"].get_submodule(name)
        assert int(bn.num_batches_tracked) == 2 and int(plain.num_batches_tracked) == 1
        # Two momentum-0.1 updates from zero with the same batch mean: 0.19·μ instead of 0.1·μ.
        torch.testing.assert_close(bn.running_mean, 1.9 * plain.running_mean)
    for key, grad in checkpointed["grads"].items():  # gradients are unaffected
        torch.testing.assert_close(grad, reference["grads"][key])


@pytest.mark.slow
def test_preserve_rng_state_false_gives_wrong_gradients_and_the_fix_restores_them():
    original = fixture_source("dropout_rng.py")
    repaired_source = fixed(original, "TML404", unsafe_fixes=True)
    # Only the projection, which runs no random op, keeps the argument (and the docstring).
    assert original.count("preserve_rng_state=False") == 5
    assert repaired_source.count("preserve_rng_state=False") == 2
    without = types.SimpleNamespace(checkpoint=without_checkpoint)
    reference = train_step(load(original, cp=without))["model"]
    broken = train_step(load(original))["model"]
    repaired = train_step(load(repaired_source))["model"]
    assert torch.equal(broken["output"], reference["output"])  # the forward looks fine
    assert max_grad_difference(broken, reference) > 1e-3
    # The recomputation also drew from the global generator: every later step is shifted.
    assert not torch.equal(broken["next_random"], reference["next_random"])
    assert_identical({"model": repaired}, {"model": reference})
    assert torch.equal(repaired["next_random"], reference["next_random"])


def unwrapped(module, *args, **kwargs):
    """`checkpoint_wrapper` replaced by the module itself."""
    return module


@pytest.mark.slow
def test_checkpoint_wrapper_updates_batchnorm_twice_and_drops_the_rng_state():
    """torch's module wrapper behaves as TML403/TML404 say of `checkpoint` (module_wrappers.py)."""
    source = fixture_source("module_wrappers.py")
    wrapped = train_step(load(source))
    plain = train_step(load(source, checkpoint_wrapper=unwrapped))
    bn = wrapped["net"]["model"].get_submodule("block._checkpoint_wrapped_module.bn")
    reference = plain["net"]["model"].get_submodule("block.bn")
    assert int(bn.num_batches_tracked) == 2 and int(reference.num_batches_tracked) == 1
    torch.testing.assert_close(bn.running_mean, 1.9 * reference.running_mean)
    head, plain_head = wrapped["head"], plain["head"]
    assert torch.equal(head["output"], plain_head["output"])
    mlp = [key for key in head["grads"] if key.startswith("mlp.")]
    assert mlp and max((head["grads"][k] - plain_head["grads"][k]).abs().max().item() for k in mlp) > 1e-3
    repaired = train_step(load(fixed(source, "TML404", unsafe_fixes=True)))["head"]
    for key in mlp:
        torch.testing.assert_close(repaired["grads"][key], plain_head["grads"][key])


# -- messages ------------------------------------------------------------------------------
SINGLE_CONV = """
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3)
        self.act = nn.ReLU()

    def forward(self, x):
        {body}
"""


@pytest.mark.parametrize(
    "body, present, absent",
    [
        (
            "return checkpoint(self.stem, x)",
            ["reentrant variant recomputes", "`x`, the argument of `forward`"],
            [],
        ),
        (
            "return checkpoint(self.stem, x, use_reentrant=False)",
            ["call `self.stem` directly"],
            ["recomputes"],
        ),
        (
            "x = x * 2\n        return checkpoint(self.stem, x)",
            ["whenever its input does not require grad"],
            ["argument of"],
        ),
        ("return checkpoint(self.act, x)", ["single `ReLU`"], ["gradient"]),
        (
            "return checkpoint(self.stem, x, use_reentrant=flag)",
            ["if reentrant, it recomputes"],
            [],
        ),
    ],
)
def test_single_op_message_says_which_case_applies(body, present, absent):
    findings = lint_source(SINGLE_CONV.format(body=body), "f.py", Settings(select=("TML402",)))
    assert len(findings) == 1
    for text in present:
        assert text in findings[0].message
    for text in absent:
        assert text not in findings[0].message
    fix = findings[0].fix
    assert fix is not None and fix.is_safe == ("use_reentrant=False" in body)


@pytest.mark.slow
def test_unwrapping_a_checkpointed_batchnorm_is_unsafe():
    """The non-reentrant recomputation runs BatchNorm again: unwrapping changes its statistics."""
    source = SINGLE_CONV.replace("nn.ReLU()", "nn.BatchNorm2d(8)").format(
        body="return checkpoint(self.act, x, use_reentrant=False)"
    )
    (finding,) = lint_source(source, "f.py", Settings(select=("TML402",)))
    assert "single `BatchNorm2d`" in finding.message
    assert finding.fix is not None and not finding.fix.is_safe
    counts = []
    for text in (source, fixed(source, "TML402", unsafe_fixes=True)):
        model = load(text)["Net"]()
        model.train()
        model(torch.randn(2, 8, 4, 4, requires_grad=True)).sum().backward()
        counts.append(int(model.act.num_batches_tracked))
    assert counts == [2, 1]


def test_rules_stay_quiet_on_look_alikes():
    findings = lint_source(
        fixture_source("lookalikes.py"), "lookalikes.py", Settings(select=("TML4",))
    )
    assert findings == []


# -- issue 12: callees that are not names (crashed TML405 with AttributeError) ---------------
SUBSCRIPT_CALLEES = (
    "import torch.nn as nn\n"
    "from .layers import Conv, _POOLERS, make_block\n"
    "\n"
    "class Block(nn.Module):\n"
    "    def __init__(self, kind, dims):\n"
    "        super().__init__()\n"
    "        self.pooler = _POOLERS[kind]()\n"
    "        self.conv = Conv['conv', dims](8, 8, 3)\n"
    "        self.proj = make_block()(8)\n"
    "        self.stem = (lambda: nn.Identity())()\n"
    "\n"
    "    def forward(self, x):\n"
    "        x = self.pooler(x)\n"
    "        x = self.conv(x)\n"
    "        x = self.proj(x)\n"
    "        x = self.stem(x)\n"
    "        return x\n"
)
STACKED_SUBSCRIPT_BLOCKS = (
    "import torch.nn as nn\n"
    "from .layers import BLOCKS, ResidualBlock\n"
    "\n"
    "class Net(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.a = BLOCKS['res'](8)\n"
    "        self.b = ResidualBlock(8)\n"
    "        self.c = ResidualBlock(8)\n"
    "        self.d = ResidualBlock(8)\n"
    "        self.e = ResidualBlock(8)\n"
    "\n"
    "    def forward(self, x):\n"
    "        x = self.a(x)\n"
    "        x = self.b(x)\n"
    "        x = self.c(x)\n"
    "        x = self.d(x)\n"
    "        x = self.e(x)\n"
    "        return x\n"
)


@pytest.mark.slow
def test_subscript_and_call_callees_lint_without_an_internal_error(tmp_path):
    """`self.pooler = _POOLERS[kind]()` and `Conv["conv", dims](...)` (monai, diffusers,
    open_clip, transformers) stopped TML405 with `'Name' object has no attribute 'endswith'`."""
    path = tmp_path / "blocks.py"
    path.write_text(SUBSCRIPT_CALLEES)
    result = run_cli("--isolated", "--select", "ALL", "--output-format", "json", str(path))
    assert result.returncode in (0, 1), result.stderr
    assert "Traceback" not in result.stderr
    codes = [item["code"] for item in json.loads(result.stdout)]
    assert "TML900" not in codes and "TML405" not in codes


def test_a_subscript_built_block_does_not_count_but_the_named_ones_still_do():
    findings = lint_source(STACKED_SUBSCRIPT_BLOCKS, "net.py", Settings(select=("TML405",)))
    assert [f.code for f in findings] == ["TML405"]
    assert "4 blocks" in findings[0].message and "self.a" not in findings[0].message


# -- the rules ask one shared model of the file's checkpoint calls --------------------------
def test_checkpoint_calls_are_found_once_per_file(monkeypatch):
    """TML401-404 all ask `checkpoint_calls(context)`: the calls are found once per file, and
    what a call recomputes is followed once for TML403 and TML404 together."""
    from torchmemlint.analysis import segments

    built, followed = [], []
    init, contents = segments.CheckpointCalls.__init__, segments.CheckpointCall._find_contents

    def counting_init(self, *args):
        built.append(self)
        init(self, *args)

    def counting_contents(self):
        followed.append(self.node)
        return contents(self)

    monkeypatch.setattr(segments.CheckpointCalls, "__init__", counting_init)
    monkeypatch.setattr(segments.CheckpointCall, "_find_contents", counting_contents)
    findings = lint_source(
        fixture_source("dropout_rng.py"), "dropout_rng.py", Settings(select=("TML401", "TML402", "TML403", "TML404"))
    )
    assert {finding.code for finding in findings} >= {"TML404"}
    assert len(built) == 1
    assert len(followed) == len({id(node) for node in followed}) > 0


def test_a_report_made_outside_the_statements_belongs_to_its_top_level_statement():
    """A rule that reports from `visit_Module` (no statement being visited) gets the top-level
    statement from the file's index, so only that statement's positions are computed."""
    from torchmemlint.context import FileContext
    from torchmemlint.tree import parse_module

    module = parse_module("import torch\n\n\ndef f(x):\n    if x:\n        return g(x)\n")
    context = FileContext(module, "f.py", {})
    call = module.body[1].body.body[0].body.body[0].body[0].value
    context.report("TML401", call, "message", None)
    context.report("TML401", module, "message", None)
    assert [item.top for item in context.pending] == [module.body[1], None]


@pytest.mark.parametrize(
    "said, reported",
    [
        ("", True),  # the file says checkpoint elsewhere, this class does not
        ("        # checkpointing is done by the caller\n", False),  # a comment in the class
        ("        self.use_checkpoint = False\n", False),  # a name
        ("        self.mode = 'grad_checkpoint'\n", False),  # a string
    ],
)
def test_a_class_that_says_checkpoint_handles_it_itself(said, reported):
    # TML405 stays quiet on a class that mentions checkpointing anywhere, a comment included
    text = (
        "import torch.nn as nn\nfrom torch.utils.checkpoint import checkpoint\n\n\n"
        "class Block(nn.Module):\n    def __init__(self, dim):\n        super().__init__()\n"
        "        self.norm = nn.LayerNorm(dim)\n"
        "        self.mlp = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, dim))\n\n"
        "    def forward(self, x):\n        return x + self.mlp(self.norm(x))\n\n\n"
        "class Encoder(nn.Module):\n    def __init__(self, depth=12, dim=64):\n        super().__init__()\n" + said
        + "        self.blocks = nn.ModuleList([Block(dim) for _ in range(depth)])\n\n"
        "    def forward(self, x):\n        for block in self.blocks:\n            x = block(x)\n        return x\n"
    )
    found = [f.code for f in lint_source(text, "m.py", Settings(), frozenset({"TML405"}))]
    assert found == (["TML405"] if reported else [])
