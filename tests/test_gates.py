"""The rules' text gates (``Rule.needs`` / ``Rule.may_apply``): the engine runs a rule only on a
file whose text holds the words it needs, and parses a file only when some enabled rule passes.

A gate may only skip work, never a finding: linting every example and fixture with all gates
open gives exactly the findings of the gated run.
"""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from torchmemlint import engine
from torchmemlint.analysis import leak_gate, loop_facts
from torchmemlint.config import Settings
from torchmemlint.engine import lint_source
from torchmemlint.rules import all_rules
from torchmemlint.tree import node_index, parse_module

from rule_examples import examples

ROOT = Path(__file__).resolve().parent.parent
ALL = frozenset(all_rules())


def _sources():
    for rule in all_rules().values():
        cases = examples(rule.code)
        for index, code in enumerate(cases.valid):
            yield f"{rule.code}-valid-{index}", code
        for index, case in enumerate(cases.invalid):
            yield f"{rule.code}-invalid-{index}", case.code
    for path in sorted((ROOT / "fixtures").rglob("*.py")):
        yield str(path.relative_to(ROOT)), path.read_text(encoding="utf-8")


# Forms the loop rules' node-index gate (analysis.leak_gate) must let through, beyond the
# rules' own examples: a loss instance under any name, a renamed functional loss, a model that
# is only known by its mode switch.
LEAK_CASES = {
    "loss-instance-any-name": ("""import torch
import torch.nn as nn


def run(encoder, loader, opt):
    crit = nn.SmoothL1Loss()
    history = []
    for x, y in loader:
        err = crit(encoder(x), y)
        history.append(err)
    return history
""", ["TML502"]),
    "renamed-functional-loss": ("""import torch
from torch.nn.functional import cross_entropy as xent


def run(encoder, loader):
    total = 0
    for x, y in loader:
        err = xent(encoder(x), y)
        total += err
    return total
""", ["TML502"]),
    "model-known-by-its-mode-switch": ("""import torch


def score(m, loader):
    m.train(False)
    outs = []
    for x in loader:
        outs.append(m(x))
    return outs
""", ["TML502", "TML501"]),
    "model-handed-to-a-helper": ("""import torch


def _run_batch(batch, net):
    return net(batch)


def collect(loader, model):
    outs = []
    for batch in loader:
        outs.append(_run_batch(batch, model))
    return outs
""", ["TML502"]),
    "loss-class-imported-under-an-alias": ("""import torch
from torch.nn import SmoothL1Loss as Smooth


def run(encoder, loader):
    crit = Smooth()
    history = []
    for x, y in loader:
        err = crit(encoder(x), y)
        history.append(err)
    return history
""", ["TML502"]),
    # TML501's sink case: the module call and the strong sink in one function
    "sink-module-parameter": ("""import torch
import torch.nn as nn
from torchvision.utils import save_image


def sample(generator: nn.Module, z):
    images = generator(z)
    save_image(images, "samples.png")
""", ["TML501"]),
    "sink-module-part": ("""import torch
import torch.nn as nn


def reconstruct(vae: nn.Module, z):
    image = vae.decode(z)
    print(image.argmax())
""", ["TML501"]),
    "sink-comparison": ("""import torch
import torch.nn as nn


def keep_mask(scorer: nn.Module, x, margin):
    return scorer(x).sigmoid() > margin
""", ["TML501"]),
    "sink-inherited-attribute-bound": ("""import torch
import torch.nn as nn


class Base:
    def encode(self, x):
        return x


class Sampler(Base):
    def __init__(self):
        self.encode = nn.Linear(4, 4)

    def show(self, x):
        print(self.encode(x).argmax())
""", ["TML501"]),
    "sink-global-module": ("""import torch
import torch.nn as nn


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, z):
        return self.fc(z)


G = Generator()


def sample(z):
    out = G(z)
    print(out.mean().item())
""", ["TML501"]),
}
SOURCES = list(_sources()) + [(name, code) for name, (code, _) in LEAK_CASES.items()]


@pytest.mark.parametrize("name", sorted(LEAK_CASES))
def test_loop_rules_gate_lets_through(name):
    code, expected = LEAK_CASES[name]
    assert [f.code for f in lint_source(code, "example.py", Settings(), ALL)] == expected
    for alone in expected:  # each rule's own condition, without the others' to let it in
        assert [f.code for f in lint_source(code, "a.py", Settings(), frozenset({alone}))] == [alone]


@pytest.fixture
def open_gates(monkeypatch):
    """Every rule runs on every file, as before the gates (the loop rules' node-index gate,
    ``analysis.leak_gate``, included)."""
    for rule in all_rules().values():
        monkeypatch.setattr(rule, "may_apply", classmethod(lambda cls, text: True))
    monkeypatch.setattr(leak_gate, "may_report", lambda facts, codes, text: True)
    monkeypatch.setattr(leak_gate, "sink_only_functions", lambda facts, codes, text: None)


@pytest.mark.slow
def test_open_gates_give_the_same_findings(open_gates, monkeypatch):
    # (checked on ~100 examples and fixtures; tests/test_corpus_bench and the speed notes check
    # the corpora of 11 packages the same way)
    opened = {name: lint_source(code, "example.py", Settings(), ALL) for name, code in SOURCES}
    monkeypatch.undo()
    assert all_rules()["TML401"].may_apply("import torch") is False  # the gates are back
    gated = {name: lint_source(code, "example.py", Settings(), ALL) for name, code in SOURCES}
    assert sum(len(found) for found in opened.values()) > 100  # the examples do find things
    for name, _ in SOURCES:
        assert gated[name] == opened[name], name


@pytest.mark.parametrize(
    "code", sorted(code for code, rule in all_rules().items() if examples(code).invalid)
)
def test_every_invalid_example_passes_its_rule_gate(code):
    rule = all_rules()[code]
    for case in examples(code).invalid:
        assert rule.may_apply(case.code), case.code


def test_a_file_no_gate_passes_is_not_parsed(monkeypatch):
    parsed = []
    real = cst.parse_module
    monkeypatch.setattr(engine.cst, "parse_module", lambda text: parsed.append(text) or real(text))
    text = "import torch\n\ndef f(model, x):\n    return model(x)\n"
    assert lint_source(text, "a.py", Settings(), frozenset({"TML401", "TML601"})) == []
    assert parsed == []
    # the same text with a checkpoint call is parsed, and the finding is there
    text = "import torch\nfrom torch.utils.checkpoint import checkpoint\n\ndef f(m, x):\n    return checkpoint(m, x)\n"
    findings = lint_source(text, "a.py", Settings(), frozenset({"TML401", "TML601"}))
    assert [f.code for f in findings] == ["TML401"] and len(parsed) == 1


def test_a_gated_out_file_still_reports_its_syntax_error():
    findings = lint_source("import torch\ndef f(:\n", "a.py", Settings(), frozenset({"TML401"}))
    assert [f.code for f in findings] == [engine.SYNTAX_ERROR]


@pytest.mark.parametrize(
    "text, passes",
    [
        ("import torch.nn as nn\nact = nn.GELU()\n", False),  # "ELU" inside "GELU"
        ("import torch.nn.functional as F\ny = F.relu(x)\n", False),  # "elu" inside "relu"
        ("import torch.nn as nn\nact = nn.ELU()\n", True),
        ("import torch.nn as nn\nact = nn.LeakyReLU(0.1)\n", True),
        ("from torch.nn.functional import leaky_relu as lrelu\n", True),
        ("import torch\nact = partial(torch.nn.SELU)\n", True),
    ],
)
def test_tml201_gate_reads_whole_words(text, passes):
    assert all_rules()["TML201"].may_apply(text) is passes


@pytest.mark.slow
def test_only_rules_that_need_torch_skip_a_file_without_it(tmp_path):
    """TML602 reads transformers scripts, which need not name torch; the CLI finds it there.
    The other rules keep to files that name torch: the attention below is not looked at."""
    import subprocess
    import sys

    script = tmp_path / "train.py"
    script.write_text(
        "from transformers import AutoModelForCausalLM, Trainer\n\n"
        'model = AutoModelForCausalLM.from_pretrained("gpt2", attn_implementation="eager")\n'
        "scores = (q @ k.transpose(-2, -1)).softmax(dim=-1)\nout = scores @ v\n"
        "trainer = Trainer(model=model)\ntrainer.train()\n",
        encoding="utf-8",
    )
    result = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "--no-cache", "--isolated", "--select", "ALL",
         "--output-format", "json", str(script)],
        capture_output=True, text=True,
    )
    import json

    assert result.returncode == 1, result.stderr
    assert [finding["code"] for finding in json.loads(result.stdout)] == ["TML602"]


@pytest.mark.slow
def test_the_loop_gate_reads_the_same_facts_from_ast_and_from_the_node_index():
    import ast

    from torchmemlint.tree import node_index, parse_module

    compared = 0
    for name, code in SOURCES:
        try:
            tree = ast.parse(code)
        except SyntaxError:
            continue
        from_ast = loop_facts.facts_from_ast(tree).normalised()
        from_index = leak_gate.facts_from_index(node_index(parse_module(code))).normalised()
        assert from_ast == from_index, name
        compared += 1
    assert compared > 100


@pytest.mark.slow
@pytest.mark.parametrize("codes", [frozenset({code}) for code in sorted(leak_gate.LOOP_CODES)]
                         + [leak_gate.LOOP_CODES])
def test_loop_rules_alone_find_the_same_with_the_gate_open(codes, open_gates, monkeypatch):
    # With only loop rules enabled, the engine decides from Python's ast, before libcst parses.
    opened = {name: lint_source(code, "example.py", Settings(), codes) for name, code in SOURCES}
    monkeypatch.undo()
    gated = {name: lint_source(code, "example.py", Settings(), codes) for name, code in SOURCES}
    assert sum(len(found) for found in opened.values()) > 0
    for name, _ in SOURCES:
        assert gated[name] == opened[name], name


def test_a_file_only_loop_rules_could_read_is_not_parsed_by_libcst(monkeypatch):
    parsed = []
    real = cst.parse_module
    monkeypatch.setattr(engine.cst, "parse_module", lambda text: parsed.append(text) or real(text))
    model_file = (
        "import torch\n\nclass Block(torch.nn.Module):\n    def forward(self, x):\n"
        "        for layer in self.layers:\n            x = x + layer(x)\n        return x\n"
    )
    assert lint_source(model_file, "a.py", Settings()) == []
    assert parsed == []
    training = model_file + (
        "\n\ndef fit(model, loader):\n    total = 0\n    for x in loader:\n"
        "        total += model(x).sum()\n    return total\n"
    )
    assert [f.code for f in lint_source(training, "a.py", Settings())] == ["TML502"]
    assert len(parsed) == 1


@pytest.mark.parametrize("reader", ["ast", "index"])
def test_an_optimizer_loop_and_a_docstring_loss_do_not_let_the_accumulation_case_in(reader):
    # An optimizer's loop hands `grad` (a tensor, not `torch.autograd.grad`) to `add_` and
    # adds (`sqrt() + eps`); "Loss" is written only in the docstring: TML502 cannot report there. The
    # same loop handing a model, or a loss class named in the code, is let in.
    import ast

    def may_report(code):
        if reader == "ast":
            facts = loop_facts.facts_from_ast(ast.parse(code))
        else:
            facts = leak_gate.facts_from_index(node_index(parse_module(code)))
        return leak_gate.may_report(facts, frozenset({"TML502"}), code)

    optimizer = (
        '"""Adam. Loss scaling is left to the caller."""\nimport torch\n\n\n'
        "def adam_step(params, grads, exp_avgs, lr):\n"
        "    for param, grad, exp_avg in zip(params, grads, exp_avgs):\n"
        "        exp_avg.mul_(0.9).add_(grad, alpha=0.1)\n"
        "        param.addcdiv_(exp_avg, exp_avg.sqrt() + 1e-8, value=-lr)\n"
    )
    assert not may_report(optimizer)
    assert may_report(optimizer.replace("add_(grad,", "add_(model,"))
    assert may_report(optimizer.replace("import torch", "import torch\nfrom torch.nn import MSELoss"))
    assert not may_report(optimizer.replace("import torch", "import torch  # MSELoss"))


def test_sinks_without_a_module_call_in_their_function_leave_the_file_unparsed(monkeypatch):
    # `int(...)`, `print(...)`, `.item()` in functions that call no module (timm's builders,
    # checkpoint filters): TML501's sink case cannot report, libcst need not parse
    parsed = []
    real = cst.parse_module
    monkeypatch.setattr(engine.cst, "parse_module", lambda text: parsed.append(text) or real(text))
    helpers = (
        "import torch\nimport torch.nn as nn\n\n\ndef resize(state, size):\n"
        "    n = int(size[0])\n    print(state['pos'].shape)\n    return torch.zeros(n).long()\n"
        "\n\ndef report(losses):\n    return [loss.item() for loss in losses]\n"
    )
    assert lint_source(helpers, "a.py", Settings(), leak_gate.LOOP_CODES) == []
    assert parsed == []
    sampler = helpers + (
        "\n\ndef sample(generator: nn.Module, z):\n    out = generator(z)\n    print(out.item())\n"
    )
    assert [f.code for f in lint_source(sampler, "a.py", Settings(), leak_gate.LOOP_CODES)] == ["TML501"]
    assert len(parsed) == 1


def test_a_file_let_in_by_the_sink_case_alone_replays_only_its_sink_functions(monkeypatch):
    # timm's models: `forward_intermediates` runs blocks and compares indices, nothing else lets
    # the file in; the loop analysis replays only the functions the sink case names (the
    # sampler below), not every scope with a model-like call (`build`'s `self.model(x)`)
    from torchmemlint.rules import loops

    replayed = []
    real_checks = loops._Checks

    class Checks(real_checks):  # type: ignore[misc, valid-type]
        def run(self):
            replayed.append(self.scope.name)
            super().run()

    monkeypatch.setattr(loops, "_Checks", Checks)
    code = (
        "import torch\nimport torch.nn as nn\n\n\nclass Net(nn.Module):\n"
        "    def forward_intermediates(self, x, indices=2):\n        out = []\n"
        "        for i, blk in enumerate(self.blocks):\n            x = blk(x)\n"
        "            if i >= indices:\n                out.append(x)\n        return out\n\n"
        "    def build(self, x):\n        return self.model(x)\n\n\n"
        "def sample(generator: nn.Module, z):\n    out = generator(z)\n    print(out.item())\n"
    )
    facts = leak_gate.facts_from_index(node_index(parse_module(code)))
    assert not leak_gate._eval_code(facts) and leak_gate._sink_code(facts)
    assert [f.code for f in lint_source(code, "a.py", Settings(), leak_gate.LOOP_CODES)] == ["TML501"]
    assert sorted(replayed) == ["forward_intermediates", "sample"]
    replayed.clear()  # any other condition of the gate: every scope that may leak is replayed
    evaluating = code + "\n\ndef evaluate(model, x):\n    return model(x)\n"
    assert [f.code for f in lint_source(evaluating, "a.py", Settings(), leak_gate.LOOP_CODES)] == ["TML501", "TML501"]
    assert "build" in replayed and "evaluate" in replayed


def test_methods_and_plain_parameters_called_beside_sinks_leave_the_file_unparsed(monkeypatch):
    # an optimizer's `step(self, closure)` and a data class's `self._lazy_init()` with a
    # comparison or `print` beside them (timm's optimizers, readers, schedulers): a method of
    # the class, or a method's parameter neither named, annotated nor moved like a module, is
    # not a module (``module_calls``), so TML501's sink case cannot report
    parsed = []
    real = cst.parse_module
    monkeypatch.setattr(engine.cst, "parse_module", lambda text: parsed.append(text) or real(text))
    helpers = (
        "import torch\n\n\nclass Reader:\n    def _lazy_init(self):\n        return 1\n\n"
        "    def __len__(self):\n        n = self._lazy_init()\n        print(n)\n        return n\n\n\n"
        "class Sub(Reader):\n    def size(self):\n        return self._lazy_init() > 0\n\n\n"
        "class Opt:\n    def step(self, closure=None):\n        loss = None\n"
        "        if closure is not None:\n            loss = closure()\n"
        "        if loss is not None and loss > 0:\n            print(loss.item())\n        return loss\n"
    )
    assert lint_source(helpers, "a.py", Settings(), leak_gate.LOOP_CODES) == []
    assert parsed == []
    sampler = helpers + (
        "\n\ndef keep(scorer: torch.nn.Module, x, margin):\n    return scorer(x).sigmoid() > margin\n"
    )
    assert [f.code for f in lint_source(sampler, "a.py", Settings(), leak_gate.LOOP_CODES)] == ["TML501"]
    assert len(parsed) == 1


@pytest.mark.parametrize(
    "text",
    [
        "eval", "x.eval()", "model_eval()", "evaluate", "é_eval", "éval", "_train", "x=train",
        "retrain(x)", "train_step", "1train", "ütrain", "self.train(False)", "def validate(x):",
        "undef validate(x):", "async def test_x():", "def\\\n  evaluate():", "xdef predict():",
        "nn.LeakyReLU(0.1)", "F.leaky_relu(x)", "my_elu(x)", "GELU()", "nn.ELU", "ySELU", "CELU",
        "rrelu", "x.relu()", "",
    ],
)
def test_whole_word_gates_match_the_b_prefixed_regexes(text):
    """vocabulary.whole_words stands in for a leading ``\\b`` (much slower in Python's re)."""
    import re

    from torchmemlint.analysis.training import is_eval_name
    from torchmemlint.analysis.vocabulary import Saves, activation_words, whole_words
    from torchmemlint.rules.inplace import MissingInplaceSavesMemory

    mode = re.compile(r"\b(?:eval|train)\b")
    definition = re.compile(r"\bdef[\s\\]+(\w+)")
    words = re.compile(r"\b(?:%s)\b" % "|".join(activation_words(Saves.INPUT)))
    expected = bool(mode.search(text)) or any(is_eval_name(n) for n in definition.findall(text))
    assert leak_gate.eval_code_possible(text) == expected
    assert any(True for _ in whole_words(MissingInplaceSavesMemory._WORDS, text)) == bool(
        words.search(text)
    )


@pytest.mark.parametrize(
    "text",
    [
        "", "x = 1", "def f() -> int: pass", "a < b", "a>b", "a == b", "a != b", "a = b", "a <= b",
        "np.save(x)", "PRINT(x)", "y.DATA", "x.data", "import cv2", "Pil", "nothing here",
        "for x in loader: pass", "for b in BATCHES: f(b)", "for (x) in train_dataset]", "for x in data",
        "[f(b) for b in Dataloader]", "for x in\nloader", "forx in loader", "for x in ds: batches",
        "for x in ſelf.loader", "for x in daſet", "for x in DATAſET", "for x in batcheſ", "ſave(x)",
        "for x in loaderé", "é for x in dataset", "\u212aLOADER for x in loader",
    ],
)
def test_text_gate_shortcuts_answer_as_their_regexes(text):
    """``sink_code_possible`` answers a comparison operator without its case-insensitive
    regex, ``loader_comprehension_possible`` an ASCII text naming no loader without its own;
    both give the regex's answer (``ſ`` matches ``s`` under ``(?i)``, so a text that is not
    ASCII always asks the regex)."""
    assert leak_gate.sink_code_possible(text) == (leak_gate._SINK_TEXT.search(text) is not None)
    assert leak_gate.loader_comprehension_possible(text) == (leak_gate._LOADER_FOR.search(text) is not None)


@pytest.mark.parametrize("name,text", list(_sources()))
def test_text_gate_shortcuts_on_the_examples(name, text):
    assert leak_gate.sink_code_possible(text) == (leak_gate._SINK_TEXT.search(text) is not None)
    assert leak_gate.loader_comprehension_possible(text) == (leak_gate._LOADER_FOR.search(text) is not None)


def test_a_factory_gate_reads_the_project_modules_a_file_imports_from(tmp_path):
    # TML201 may report a layer that a factory of another project file returns, placed in a
    # file that names no activation: the gate opens for a `from` import of a project module
    # whose text may build one (re-exports and submodules followed), not for any `from` import
    from torchmemlint.project import REGISTRY

    package = tmp_path / "pkg"
    package.mkdir()
    files = {
        "__init__.py": "from .acts import leaky\n",
        "acts.py": "import torch.nn as nn\n\n\ndef leaky():\n    return nn.LeakyReLU(0.1)\n",
        "utils.py": "import torch\n\n\ndef clip(x):\n    return torch.clamp(x, 0, 1)\n",
        "opt.py": "import torch\nfrom .utils import clip\n\n\ndef step(x):\n    return clip(x)\n",
        "net.py": "import torch.nn as nn\nfrom .acts import leaky\n\nBODY = nn.Sequential(nn.Conv2d(3, 8, 3), leaky())\n",
        "net2.py": "import torch.nn as nn\nfrom pkg import leaky\n\nBODY = nn.Sequential(nn.Conv2d(3, 8, 3), leaky())\n",
        "net3.py": "import torch.nn as nn\nfrom . import acts\n\nBODY = nn.Sequential(nn.Conv2d(3, 8, 3), acts.leaky())\n",
    }
    for name, text in files.items():
        (package / name).write_text(text, encoding="utf-8")
    REGISTRY.set_run([str(package / name) for name in files])
    try:
        rule = all_rules()["TML201"]
        gate = {name: rule.may_apply_at(text, str(package / name)) for name, text in files.items()}
        assert gate["opt.py"] is False and gate["utils.py"] is False
        assert gate["net.py"] is True and gate["net2.py"] is True and gate["net3.py"] is True
        assert rule.may_apply_at(files["opt.py"], None) is True  # no path: any `from` import
        assert [f.code for f in lint_source(files["net.py"], str(package / "net.py"), Settings())] == ["TML201"]
    finally:
        REGISTRY.set_run([])
