"""The engine's shortcuts give exactly the answers of the long way.

- Positions computed for only the top-level statements that hold findings (``ast`` finds
  where each starts) equal those of the full position pass: ranges, fixes and `# noqa` rows.
- A file that names no grad-mode switch skips the scan for functions that use one.
"""

from __future__ import annotations

import dataclasses

import libcst as cst
import pytest

from torchmemlint import engine, positions
from torchmemlint.analysis.autograd import ScopeWalk
from torchmemlint.analysis.names import Bindings
from torchmemlint.config import Settings
from torchmemlint.rules import all_rules

from test_positions import CASES

NOQA = '''import torch
import torch.nn as nn


# a comment before the class
@decorate(
    1,
)
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = nn.ReLU()  # noqa: TML101
        self.drop = nn.Dropout(
            0.1)  # noqa

    def forward(self, x):
        return self.drop(self.act(self.act(
            x)))  # noqa


x = 1; y = 2


class Other(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(self.act(x))
'''


def _lint(text: str, partial: bool, monkeypatch) -> list:
    if not partial:
        monkeypatch.setattr(positions, "_partial_positions", lambda *args: None)
    findings = engine.lint_source(text, "m.py", Settings(), frozenset(all_rules()), ignore_noqa=True)
    monkeypatch.undo()
    return [(finding, finding.noqa_rows) for finding in findings]


@pytest.mark.slow
def test_partial_positions_equal_the_full_pass(monkeypatch):
    used = []
    original = positions._partial_positions

    def counting(*args):
        result = original(*args)
        used.append(result is not None)
        return result

    cases = dict(CASES, noqa=NOQA)
    for name, text in sorted(cases.items()):
        monkeypatch.setattr(positions, "_partial_positions", counting)
        fast = _lint(text, True, monkeypatch)
        assert fast == _lint(text, False, monkeypatch), name
    # The shortcut is taken on most files with findings, and the comparison is not vacuous.
    assert sum(used) >= 10 and sum(used) > len(used) // 2


def test_partial_positions_taken_and_noqa_rows(monkeypatch):
    calls = []
    original = positions._partial_positions
    monkeypatch.setattr(
        positions, "_partial_positions", lambda *args: calls.append(original(*args)) or calls[-1]
    )
    findings = engine.lint_source(NOQA, "m.py", Settings(), frozenset({"TML101"}))
    assert calls and calls[0] is not None  # one of two classes: the shortcut
    # Only the second class reports: the first's are suppressed by its `# noqa` comments, one
    # on the last row of a two-row statement.
    assert [(finding.code, finding.location.row) for finding in findings] == [("TML101", 27)]
    every = engine.lint_source(NOQA, "m.py", Settings(), frozenset({"TML101"}), ignore_noqa=True)
    assert [finding.noqa_rows for finding in every] == [(12,), (13, 14), (27,)]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("import torch\ndef f():\n    with torch.no_grad():\n        yield\n", {"f"}),
        ("import torch\ndef f():\n    with torch.enable_grad():\n        yield\n", {"f"}),
        ("import torch\ndef f():\n    with open('x'):\n        yield\n", set()),
    ],
)
def test_grad_switching_scan_only_where_a_switch_is_named(text, expected):
    module = cst.parse_module(text)
    bindings = Bindings()
    bindings.bind_statements(module.body)
    gated = ScopeWalk(module, bindings, lambda *words: any(word in text for word in words))
    assert gated.grad_switching == ScopeWalk(module, bindings).grad_switching == expected


def test_language_server_lints_unchanged_text_once(tmp_path, monkeypatch):
    from pygls.workspace import TextDocument

    from torchmemlint import lsp

    calls = []
    real = lsp.lint_source
    monkeypatch.setattr(lsp, "lint_source", lambda *args, **kw: calls.append(args) or real(*args, **kw))
    server = lsp.TorchMemLintServer()
    settings = [Settings(root=str(tmp_path), select=("TML101",))]
    monkeypatch.setattr(server, "settings_for", lambda path: settings[0])
    uri = (tmp_path / "m.py").as_uri()
    document = TextDocument(uri, NOQA)
    first = server.findings(document)[0]
    assert first and server.findings(document)[0] == first and len(calls) == 1  # a save
    edited = TextDocument(uri, NOQA.replace("nn.ReLU()", "nn.Tanh()"))
    assert server.findings(edited)[0] != first and len(calls) == 2  # an edit
    settings[0] = Settings(root=str(tmp_path), select=("TML202",))
    assert server.findings(edited)[0] != first and len(calls) == 3  # other settings


NESTED = '''import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class Outer(nn.Module):
    # a comment before a decorated method
    @staticmethod
    @decorate(
        1,
    )
    def first(f, x):
        if x:
            # a comment before a nested statement

            y = checkpoint(f, x)
        elif x is None:
            y = checkpoint(f, x); z = checkpoint(f, y)
        else:
            y = checkpoint(
                f,
                x,
            )
        for i in range(3): y = checkpoint(f, y)
        while False:
            pass
        else:
            y = checkpoint(f, y)
        try:
            y = checkpoint(f, y)
        except ValueError as error:
            y = checkpoint(f, y)
        else:
            y = checkpoint(f, y)
        finally:
            drop = nn.Dropout(0.1, inplace=True)
        with torch.autocast("cpu"):  # (under no_grad a checkpoint recomputes nothing: no finding)
          y = checkpoint(f, y)  # two-space block
        match y:
            case 1:
                y = checkpoint(f, y)
            case _:
                pass
        return y

    class Inner:
        def g(self, f, x):
            return checkpoint(f, x)

    async def h(self, f, x):
        async with lock:
            return checkpoint(f, x)


def tail(f, x):
    """A docstring."""
    return [checkpoint(f, x) for _ in range(2)]
'''


@pytest.mark.parametrize(
    "variant", ["lf", "crlf", "tabs"],
)
def test_partial_positions_equal_the_full_pass_in_nested_blocks(variant, monkeypatch):
    text = NESTED
    if variant == "crlf":
        text = text.replace("\n", "\r\n")
    elif variant == "tabs":
        text = text.replace("        ", "\t\t").replace("    ", "\t").replace("  y = ", "\ty = ")
    fast = _lint(text, True, monkeypatch)
    slow = _lint(text, False, monkeypatch)
    assert len(fast) >= 15
    assert fast == slow


TWINS = '''"""A module whose docstring quotes one of its functions:

def quoted(f, x):
    return checkpoint(f, x)
"""
import torch
from torch.utils.checkpoint import checkpoint


def quoted(f, x):
    return checkpoint(f, x)


def twin(f, x):
    return checkpoint(f, x)


def twin(f, x):
    return checkpoint(f, x)


def alone(f, x):
    return checkpoint(f, x)


def other(a):
    return a


def more(a):
    return a


def last(a):
    return a
'''


def test_partial_positions_place_a_statement_only_where_its_code_is_unique(monkeypatch):
    """Each statement's code is looked up in the text: a statement whose code is there twice
    (identical twins, a docstring quoting it) cannot be placed, and the full pass is made."""
    results = []
    original = positions._partial_positions
    monkeypatch.setattr(
        positions, "_partial_positions", lambda *args: results.append(original(*args)) or results[-1]
    )
    fast = _lint(TWINS, True, monkeypatch)
    assert fast == _lint(TWINS, False, monkeypatch)
    assert [finding.location.row for finding, _ in fast] == [11, 15, 19, 23]
    assert results == [None]  # the twins: placed by the full pass
    single = TWINS.split("\n\n\ndef twin")[0] + "\n"
    results.clear()
    monkeypatch.setattr(
        positions, "_partial_positions", lambda *args: results.append(original(*args)) or results[-1]
    )
    assert [f.location.row for f, _ in _lint(single, True, monkeypatch)] == [11]
    assert results == [None]  # the function quoted by the docstring: its code is there twice


# -- parsing without libcst's per-node checks -------------------------------------------------
def _fixture_texts():
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "fixtures"
    return [path.read_text(encoding="utf-8") for path in sorted(root.rglob("*.py"))]


@pytest.mark.slow
def test_unchecked_parse_builds_the_tree_libcst_builds():
    from torchmemlint.tree import parse_module

    # The fixtures, the awkward texts (CRLF, CR, tabs, BOM ...), the rules' examples and the
    # package's top-level modules (test_positions.CASES).
    texts = _fixture_texts() + list(CASES.values()) + [NOQA]
    assert len(texts) > 100
    for text in texts:
        fast, plain = parse_module(text), cst.parse_module(text)
        assert fast.deep_equals(plain)
        assert fast.code == plain.code


def test_unchecked_parse_restores_the_checks_after_success_and_after_a_syntax_error():
    from torchmemlint.tree import parse_module

    checked = cst.CSTNode.__post_init__
    parse_module("x = 1\n")
    assert cst.CSTNode.__post_init__ is checked
    with pytest.raises(cst.ParserSyntaxError):
        parse_module("def broken(:\n")
    assert cst.CSTNode.__post_init__ is checked
    # nodes built after a parse (as fixes build them) are checked again
    with pytest.raises(cst.CSTValidationError):
        cst.Name("")
    with pytest.raises(cst.CSTValidationError):
        cst.Call(func=cst.Name("f"), lpar=[cst.LeftParen()])  # unbalanced parentheses


# -- libcst's node constructors, written once at import (tree.py) ------------------------------
def _bare(signature):
    return [(p.name, p.kind, p.default) for p in signature.parameters.values()]


def test_node_constructors_take_what_the_dataclass_constructors_take():
    import inspect

    from torchmemlint.tree import ORIGINAL_CONSTRUCTORS

    assert len(ORIGINAL_CONSTRUCTORS) > 300  # every concrete node class of libcst
    for node_type, original in ORIGINAL_CONSTRUCTORS.items():
        assert node_type.__init__ is not original
        assert _bare(inspect.signature(node_type.__init__)) == _bare(inspect.signature(original)), node_type
    # a field's default factory runs for each node, as the dataclass's does
    first, second = cst.Call(func=cst.Name("f")), cst.Call(func=cst.Name("g"))
    assert first.whitespace_after_func is not second.whitespace_after_func
    assert first.whitespace_after_func.deep_equals(cst.SimpleWhitespace(""))
    with pytest.raises(TypeError):
        cst.Name()  # (a field without a default is required)
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.func = cst.Name("h")  # (still frozen)


@pytest.mark.slow
def test_node_constructors_build_the_trees_the_dataclass_constructors_build():
    from torchmemlint.tree import ORIGINAL_CONSTRUCTORS, parse_module

    texts = _fixture_texts() + list(CASES.values()) + [NOQA]
    faster = {node_type: node_type.__init__ for node_type in ORIGINAL_CONSTRUCTORS}
    ours = [parse_module(text) for text in texts]
    try:
        for node_type, original in ORIGINAL_CONSTRUCTORS.items():
            node_type.__init__ = original
        theirs = [cst.parse_module(text) for text in texts]
        built = cst.Call(func=cst.Attribute(cst.Name("torch"), cst.Name("relu")), args=[cst.Arg(cst.Name("x"))])
    finally:
        for node_type, constructor in faster.items():
            node_type.__init__ = constructor
    for mine, libcst_tree in zip(ours, theirs):
        assert mine.deep_equals(libcst_tree)
        assert mine.code == libcst_tree.code
    assert cst.Call(func=cst.Attribute(cst.Name("torch"), cst.Name("relu")), args=[cst.Arg(cst.Name("x"))]).deep_equals(built)


# -- the engine's walk meets only the nodes that matter, in the order a recursive walk would ---
@pytest.mark.slow
def test_engine_walk_dispatches_as_a_recursive_walk():
    from torchmemlint.context import FileContext
    from torchmemlint.rules.base import Rule
    from torchmemlint.tree import children, parse_module

    log = []

    class Recorder(Rule):
        code = "TML999"

        def visit_Call(self, node):
            log.append(("visit", "Call", id(node), len(self.context.statement_stack)))

        def leave_Call(self, node):
            log.append(("leave", "Call", id(node), len(self.context.statement_stack)))

        def visit_Name(self, node):
            log.append(("visit", "Name", id(node), len(self.context.statement_stack)))

        def leave_FunctionDef(self, node):
            log.append(("leave", "FunctionDef", id(node), len(self.context.statement_stack)))

        def visit_Param(self, node):  # a name bound in the scope the walk has entered
            log.append(("visit", "Param", node.name.value, self.context.qualify(node.name)))

    statement_types = (cst.SimpleStatementLine, cst.BaseCompoundStatement)

    def expected(node, depth, out, statements):
        is_statement = isinstance(node, statement_types)
        depth += is_statement
        if is_statement:
            statements.append(node)
        name = type(node).__name__
        if name in ("Call", "Name"):
            out.append(("visit", name, id(node), depth))
        if name == "Param":
            out.append(("visit", "Param", node.name.value, None))
        for child in children(node):
            expected(child, depth, out, statements)
        if name in ("Call", "FunctionDef"):
            out.append(("leave", name, id(node), depth))

    texts = _fixture_texts() + [NOQA]
    for text in texts:
        module = parse_module(text)
        context = FileContext(module, "a.py", {}, text)
        log.clear()
        walker = engine._BatchedWalker(context, [Recorder(context)])
        walker.walk(module)
        want, statements = [], []
        expected(module, 0, want, statements)
        assert log == want
        assert walker.statements == statements
        assert context.statement_stack == [] and context.bindings is context.module_bindings


def test_lint_source_turns_the_cyclic_collector_back_to_how_it_was(monkeypatch):
    import gc

    seen = []
    real = engine._lint_source

    def spy(*args):
        seen.append(gc.isenabled())
        return real(*args)

    monkeypatch.setattr(engine, "_lint_source", spy)
    text = "import torch\nimport torch.nn as nn\n\nclass B(nn.Module):\n    pass\n"
    assert gc.isenabled()
    engine.lint_source(text, "a.py", Settings())
    assert gc.isenabled() and seen == [False]  # off while linting, on again after
    gc.disable()
    try:
        engine.lint_source(text, "a.py", Settings())
        assert not gc.isenabled()  # a caller that turned it off keeps it off
    finally:
        gc.enable()

    def broken(*args):
        raise RuntimeError("boom")

    monkeypatch.setattr(engine, "_lint_source", broken)
    found = engine.lint_source(text, "a.py", Settings())
    assert [f.code for f in found] == [engine.INTERNAL_ERROR] and gc.isenabled()


# Forms whose analyses built cycles of their own (each freed only by the cyclic collector
# before): a checkpointed block whose class builds on another class of the file (the class
# models of ``CallableModel``), a helper running the model it is handed, a model's method that
# returns what a submodule returns (recursive local functions).
_CYCLE_PRONE = ("""import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class Base(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)


class Block(Base):
    def __init__(self):
        super().__init__()
        self.norm = nn.BatchNorm1d(4)

    def forward(self, x):
        return self.norm(self.fc(x))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()

    def forward(self, x):
        return checkpoint(self.block, x, use_reentrant=False)
""", """import torch


def _run_batch(batch, net):
    out = net(batch)
    return out.sigmoid()


def collect(loader, model):
    outs = []
    for batch in loader:
        outs.append(_run_batch(batch, model))
    return outs
""", """import torch
import torch.nn as nn


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.decoder = nn.Linear(8, 8)

    def generate(self, n):
        z = torch.randn(n, 8)
        out = self.decoder(z)
        return out * 2


def show(n):
    model = VAE()
    model.eval()
    samples = model.generate(n)
    print(samples.mean().item())
""")


def test_a_lint_leaves_no_reference_cycle_holding_the_tree():
    # The analyses refer to each other and to the file's context; FileContext.close breaks
    # those cycles when the lint ends, so that the tree is freed at once (by reference counts)
    # instead of by the cyclic collector walking it (a tenth of a timm lint before). Every
    # rule's examples, all rules on: nothing the collector finds may hold a node.
    import gc

    from rule_examples import examples

    sources = list(_CYCLE_PRONE)
    for code in sorted(all_rules()):
        found = examples(code)
        sources += list(found.valid) + [invalid.code for invalid in found.invalid]
    assert len(sources) > 100
    codes = frozenset(all_rules())
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for text in sources:
            engine.lint_source(text, "model.py", Settings(), codes=codes)
        gc.collect()
        held = sorted({type(o).__name__ for o in gc.garbage if isinstance(o, cst.CSTNode)})
        owners = sorted({
            f"{type(o).__module__}.{type(o).__qualname__}" for o in gc.garbage
            if type(o).__module__.startswith("torchmemlint")
            or (type(o).__name__ == "function" and o.__module__.startswith("torchmemlint"))
        })
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert (held, owners) == ([], [])


METHODS = {
    # findings inside methods: only those methods are generated (a tab-indented body, a
    # decorated method with comments before it, two methods of one class)
    "methods": (
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"
        "class Net(nn.Module):\n"
        "\tdef __init__(self):\n\t\tsuper().__init__()\n\t\tself.conv = nn.Conv2d(3, 8, 3)\n"
        "\t\tself.act = nn.ReLU()\n\n"
        "\t# the forward pass\n\t@torch.jit.ignore\n"
        "\tdef forward(self, x):\n\t\treturn F.relu(self.conv(x))\n\n"
        "\tdef predict(self, x):\n\t\treturn self.act(self.conv(x)).argmax(1)\n\n\n"
        "def evaluate(model, x):\n    print(model(x).sum().item())\n"
    ),
    # the same method text in two classes: its code is in the file twice, so the classes
    # are generated whole; a finding on a class attribute: the class whole too
    "twins": (
        "import torch.nn as nn\nimport torch.nn.functional as F\n\n\n"
        "class A(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.conv = nn.Conv2d(3, 8, 3)\n\n    def forward(self, x):\n"
        "        return F.relu(self.conv(x))\n\n\n"
        "class B(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.conv = nn.Conv2d(3, 8, 3)\n\n    def forward(self, x):\n"
        "        return F.relu(self.conv(x))\n\n\n"
        "class C(nn.Module):\n    act = nn.ReLU()\n\n    def __init__(self):\n        super().__init__()\n"
        "        self.conv = nn.Conv2d(3, 8, 3)\n\n    def forward(self, x):\n        return self.act(self.conv(x))\n"
    ),
}


@pytest.mark.parametrize("name", sorted(METHODS))
def test_partial_positions_of_methods_equal_the_full_pass(name, monkeypatch):
    generated = []
    real = positions._OffsetPositions.__init__

    def spy(self, *args, **kwargs):
        real(self, *args, **kwargs)
        generated.append(self)

    monkeypatch.setattr(positions._OffsetPositions, "__init__", spy)
    fast = _lint(METHODS[name], True, monkeypatch)
    methods_alone = [state for state in generated if state.indent_tokens == ["\t"]]
    assert fast and fast == _lint(METHODS[name], False, monkeypatch)
    # "methods": its methods alone were generated, under the class body's tab (and nothing
    # else was); "twins" has no tab
    assert bool(methods_alone) == (name == "methods")


def _reference_index(root: cst.CSTNode):
    """The lists ``NodeIndex`` keeps, the long way: a recursive walk over ``children``."""
    from torchmemlint.tree import children

    order, parent, end, scope = [], [], [], []

    def visit(node, above, inside):
        here = len(order)
        order.append(node)
        parent.append(above)
        scope.append(inside)
        end.append(None)
        below = here if type(node) in (cst.FunctionDef, cst.ClassDef) else inside
        for child in children(node):
            visit(child, here, below)
        end[here] = len(order)

    visit(root, -1, -1)
    return order, parent, end, scope


NESTED_DEFINITIONS = '''
import torch


class Outer(torch.nn.Module):
    class Inner:
        def method(self, x=lambda y: y + 1):
            def local(z):
                return [w for w in z if w]
            return local(x)

    def forward(self, x):
        if x:
            return {k: v for k, v in x.items()}
        return (lambda: x)()


def top(a, *b, c=1, **d):
    @decorate(a)
    def inner():
        pass
    return inner
'''


def test_the_node_index_holds_what_a_recursive_walk_finds():
    """Order, parents, subtree ends and scopes of ``NodeIndex`` (built from the ends back,
    without looking a child up) equal a recursive walk's, on nested definitions and on real
    modules: the engine's own."""
    from pathlib import Path

    from torchmemlint.tree import NodeIndex, children, parse_module

    package = Path(engine.__file__).parent
    texts = [NESTED_DEFINITIONS] + [path.read_text(encoding="utf-8") for path in sorted(package.glob("*.py"))[:12]]
    for text in texts:
        module = parse_module(text)
        index = NodeIndex(module, register=False)
        order, parent, end, scope = _reference_index(module)
        assert [id(node) for node in index.order] == [id(node) for node in order]
        assert index.parent == parent and index.end == end and index.scope == scope
        assert index.kids == [children(node) for node in order]
        assert all(index.position[id(node)] == here for here, node in enumerate(order))


def _exceeds_reference(text: str) -> bool:
    """``engine.may_exceed_python_limits`` the long way: every line's length, and the running
    bracket depth over every character (brackets in strings and comments count too)."""
    if len(text) < engine._DEEP_BRACKETS:
        return False
    if any(len(line) >= engine._LONG_LINE for line in text.splitlines()):
        return True
    depth = deepest = 0
    for char in text:
        depth += 1 if char in "([{" else -1 if char in ")]}" else 0
        deepest = max(deepest, depth)
    return deepest > engine._DEEP_BRACKETS


@pytest.mark.parametrize("depth", [99, 100, 101, 150])
@pytest.mark.parametrize("filler", ["", "x = 'é(' # ]\n", "f(a)[b]{c} ", "\u00e9\u4e2d"])
def test_the_depth_screen_counts_only_brackets(depth, filler):
    text = filler * 3 + "y = " + "(" * depth + "1" + ")" * depth + "\n" + filler * 200
    assert engine.may_exceed_python_limits(text) == _exceeds_reference(text)
    if "(" not in filler:  # balanced or bracket-free filler: the expression's depth decides
        assert engine.may_exceed_python_limits(text) == (depth > 100)


def test_the_depth_screen_on_real_modules():
    from pathlib import Path

    package = Path(engine.__file__).parent
    texts = [path.read_text(encoding="utf-8") for path in sorted(package.rglob("*.py"))]
    texts += ["(" * 60 + "x" * 600, ")" * 300 + "(" * 101, "[" * 101 + "]" * 101, "a = 1\n" * 30]
    assert [engine.may_exceed_python_limits(text) for text in texts] == [_exceeds_reference(text) for text in texts]
    assert any(engine.may_exceed_python_limits(text) for text in texts[-4:])


_REPO = __import__("pathlib").Path(__file__).resolve().parent.parent
LITERALS = [
    "'abc'", '"abc"', "''", '""', "'''a\nb'''", '"""a\n"b"\n"""', "'''x'''", '""""""', "'it''s'",
    r"'a\nb'", r"'\x41\u00e9'", r"'\''", "r'a\\d'", "R'x'", "b'bytes'", "rb'\\x00'", "u'uni'",
    "'ünï cødé'", "'''a\r\nb'''", "'''a\rb'''", '"with \'quotes\'"', "'{}'", "'#not a comment'",
    "0", "00", "7", "1_000", "0x1F", "0X_ff", "0o17", "0b1010", "123456789012345678901234567890",
    "1.0", ".5", "1.", "1e-5", "1E+3", "3.14_15", "1_0.5e1_0", "0.0", "1e400", "0e0",
]


@pytest.mark.parametrize("text", LITERALS)
def test_literal_values_are_those_of_ast_literal_eval(text):
    import ast

    import torchmemlint.tree  # noqa: F401 - installs the fast readers

    node = cst.parse_expression(text)
    assert type(node) in (cst.SimpleString, cst.Integer, cst.Float, cst.ConcatenatedString)
    value = node.evaluated_value
    expected = ast.literal_eval(text)
    assert type(value) is type(expected) and value == expected


def test_literal_values_of_every_literal_in_real_files_are_those_of_ast_literal_eval():
    import ast

    from torchmemlint.tree import NodeIndex, parse_module

    seen = 0
    for path in sorted((_REPO / "torchmemlint" / "analysis").rglob("*.py")):  # (the rules' own literals)
        module = parse_module(path.read_text(encoding="utf-8"))
        for node in NodeIndex(module, register=False).order:
            if type(node) in (cst.SimpleString, cst.Integer, cst.Float):
                expected = ast.literal_eval(node.value)
                assert node.evaluated_value == expected and type(node.evaluated_value) is type(expected), node.value
                seen += 1
    assert seen > 3000


# -- garbage collection in a batch worker --------------------------------------------------------
class _Holder:
    pass


def test_a_batch_worker_collects_what_a_file_left_in_cycles_and_freezes_what_lives(monkeypatch):
    import gc

    from torchmemlint import pool
    import weakref

    monkeypatch.setattr(pool, "_blocks_after_collection", None)
    gc.disable()  # (as while a worker lints: only the worker's own collections free cycles)
    try:
        garbage = _Holder()
        garbage.me = garbage  # a cycle nothing else refers to
        dead = weakref.ref(garbage)
        kept = _Holder()
        kept.me = kept
        del garbage
        pool.between_items()
        assert dead() is None
        assert gc.get_freeze_count() > 0
        # a cycle closed later among frozen objects is freed by the next full collection
        monkeypatch.setattr(pool, "_GROWTH_STEP", -(10 ** 9))
        old = weakref.ref(kept)
        del kept
        pool.between_items()
        assert old() is None
    finally:
        gc.unfreeze()
        gc.enable()


def test_the_summary_lint_of_a_cache_miss_restores_the_collector_and_keeps_no_tree(tmp_path):
    import gc

    path = tmp_path / "model.py"
    path.write_text("import torch.nn as nn\n\nclass M(nn.Module):\n    def forward(self, x):\n        return nn.functional.relu(x)\n")
    for enabled in (True, False):
        (gc.enable if enabled else gc.disable)()
        try:
            result = engine._lint_data(str(path), path.read_bytes(), Settings(), False, summary=True)
            assert gc.isenabled() is enabled
        finally:
            gc.enable()
        assert result.summary is not None
        assert not any(type(obj).__name__ == "Module" and type(obj).__module__.startswith("libcst")
                       for obj in gc.get_referents(result))
