"""TML5xx (training and evaluation loop leaks): the CLI on the fixtures, precision, and the
unsafe fixes run with torch to check what they change and what they keep."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch

from torchmemlint.config import Settings
from torchmemlint.engine import lint_source
from torchmemlint.fixer import fix_text
from torchmemlint.rules import loops as _loops

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "lint" / "loops"
EXPECT = re.compile(r"#\s*expect:\s*((?:TML\d{3}\s*)+)")
LOOP_CODES = ("TML501", "TML502", "TML503", "TML504", "TML505")


def run_cli(*args: str, cwd: Path = FIXTURES) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "torchmemlint", "--isolated", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def json_findings(*args: str, cwd: Path = FIXTURES) -> list:
    result = run_cli("--output-format", "json", *args, cwd=cwd)
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout)


def expected_markers() -> Counter:
    expected: Counter = Counter()
    for path in sorted(FIXTURES.glob("*.py")):
        for row, line in enumerate(path.read_text().splitlines(), start=1):
            match = EXPECT.search(line)
            if match:
                for code in match.group(1).split():
                    expected[(path.name, row, code)] += 1
    return expected


@pytest.fixture(scope="module")
def cli_findings():
    return json_findings("--select", "TML5", ".")


@pytest.mark.slow
def test_fixture_findings_match_their_expect_markers(cli_findings):
    found = Counter(
        (Path(f["filename"]).name, f["location"]["row"], f["code"]) for f in cli_findings
    )
    expected = expected_markers()
    assert {code for _, _, code in expected} == set(LOOP_CODES), "every rule has a fixture"
    assert found == expected


def fixture_findings(name: str, settings: Settings, ignore_noqa: bool = False):
    text = (FIXTURES / name).read_text()
    return lint_source(text, name, settings, ignore_noqa=ignore_noqa)


def test_tensor_on_self_is_off_by_default():
    codes = {
        f.code for path in FIXTURES.glob("*.py") for f in fixture_findings(path.name, Settings())
    }
    assert "TML505" not in codes
    assert {"TML501", "TML502", "TML503", "TML504"} <= codes


def test_noqa_suppresses_an_accumulation_statement():
    path = "loops_in_functions.py"
    row = next(
        number
        for number, line in enumerate((FIXTURES / path).read_text().splitlines(), start=1)
        if "noqa: TML502" in line
    )
    settings = Settings(select=("TML502",))
    assert row not in {f.location.row for f in fixture_findings(path, settings)}
    ignored = fixture_findings(path, settings, ignore_noqa=True)
    assert row in {f.location.row for f in ignored}


def test_quoted_figures_match_the_benchmark_results():
    results = FIXTURES.parent.parent.parent / "benchmarks" / "results" / "memory_figures.json"
    leaks = json.loads(results.read_text())["f_training_loop_leaks"]
    assert _loops.EVAL_PEAK_FACTOR == f"x{leaks['eval_without_no_grad_peak_ratio']:.2f}"
    assert _loops.EVAL_GROWTH == f"{leaks['eval_total_loss_growth_per_iteration'] / 1e6:.2f} MB"
    assert _loops.RETAIN_GRAPH_PEAK == f"+{round(leaks['retain_graph_peak_change_pct'])} %"
    assert _loops.LIST_GROWTH == f"{leaks['feats_list_growth_per_iteration'] / 1e6:.1f} MB"
    assert leaks["feats_list_detached_growth_per_iteration"] == leaks[
        "feats_list_growth_per_iteration"
    ]  # TML504's "`.detach()` does not help"
    assert leaks["train_total_loss_growth_per_iteration"] == 0  # TML502's "does not grow"


@pytest.mark.slow
def test_messages_say_whether_the_loop_trains(cli_findings):
    findings = [
        f for f in cli_findings
        if f["code"] == "TML502" and Path(f["filename"]).name == "loops_in_functions.py"
    ]
    by_row = {f["location"]["row"]: f["message"] for f in findings}
    source = (FIXTURES / "loops_in_functions.py").read_text().splitlines()
    training_row = source.index("        running += loss  # expect: TML502") + 1
    eval_row = source.index("        total_loss += loss  # expect: TML502") + 1
    assert "device memory does not grow" in by_row[training_row]
    assert "host memory grows" in by_row[training_row]
    assert "without backward and outside `torch.no_grad()`" in by_row[eval_row]
    assert "saved activations" in by_row[eval_row]


def lint(code: str, select: str = "TML5"):
    return lint_source(code, "example.py", Settings(select=(select,)))


PRECISION_CASES = {
    "item": "import torch\nrunning = 0.0\nfor x, y in loader:\n"
    "    loss = criterion(model(x), y)\n    loss.backward()\n    running += loss.item()\n",
    "float": "import torch\nrunning = 0.0\nfor x, y in loader:\n"
    "    loss = criterion(model(x), y)\n    running += float(loss)\n",
    "integer counters": "import torch\nseen, steps = 0, 0\nfor x, y in loader:\n"
    "    out = model(x)\n    seen += x.size(0)\n    steps += 1\n    correct = 0\n"
    "    correct += (out.argmax(1) == y).sum().item()\n",
    "under no_grad": "import torch\nmodel.eval()\nwith torch.no_grad():\n    total = 0\n"
    "    outs = []\n    for x, y in loader:\n        out = model(x)\n"
    "        total += criterion(out, y)\n        outs.append(out)\n",
    "detached cpu tensors": "import torch\nouts = []\nfor x in loader:\n"
    "    out = model(x)\n    outs.append(out.detach().cpu())\n",
    "floats in a list": "import torch\nlosses = []\nfor x, y in loader:\n"
    "    loss = loss_fn(model(x), y)\n    loss.backward()\n    losses.append(loss.item())\n",
    "decorated": "import torch\n@torch.inference_mode()\ndef evaluate(model, loader):\n"
    "    return sum(model(x).sum() for x in loader)\n",
    "names in other functions are not followed": "import torch\n"
    "def helper(x):\n    return model(x)\n"
    "def run(loader):\n    total = 0\n    for x in loader:\n        total += helper(x)\n",
}

LOOK_ALIKE = (
    "import torch\nimport {nn}\ncrit = nn.CrossEntropyLoss()\nmodel.train()\ntotal = 0\n"
    "for x, y in loader:\n    out = model(x)\n    total += crit(out, y)\n"
)


@pytest.mark.parametrize("code", PRECISION_CASES.values(), ids=PRECISION_CASES.keys())
def test_must_not_be_reported(code):
    assert lint(code) == []


def test_a_loss_class_is_a_loss_only_when_it_comes_from_torch():
    assert [f.code for f in lint(LOOK_ALIKE.format(nn="torch.nn as nn"))] == ["TML502"]
    assert lint(LOOK_ALIKE.format(nn="mylib.nn as nn")) == []


@pytest.mark.parametrize(
    "code, select",
    [
        ("def run(net, xs):\n    net.eval()\n    for x in xs:\n        print(net(x))\n", "TML501"),
        (
            "for x, y in loader:\n    loss = criterion(model(x), y)\n"
            "    loss.backward(\n        retain_graph=True,\n    )\n",
            "TML503",
        ),
    ],
    ids=["wrap", "retain_graph"],
)
def test_fixes_keep_crlf_line_endings(code, select):
    settings = Settings(select=(select,))
    unix = fix_text("import torch\n" + code, lambda t: lint_source(t, "a.py", settings), True)
    crlf_source = ("import torch\n" + code).replace("\n", "\r\n")
    crlf = fix_text(crlf_source, lambda t: lint_source(t, "a.py", settings), True)
    assert unix.fixed and crlf.text == unix.text.replace("\n", "\r\n")


@pytest.mark.slow
def test_following_names_within_a_function():
    code = (
        "import torch\ndef train(model, loader, opt):\n    total = 0\n    for x, y in loader:\n"
        "        out = model(x)\n        loss = criterion(out, y)\n        scaled = loss * 2\n"
        "        scaled.backward()\n        opt.step()\n        total += scaled\n"
        "        total += loss.detach()\n"
    )
    findings = lint(code)
    assert [(f.code, f.location.row) for f in findings] == [("TML502", 10)]


HELPER_SPLIT = (
    "import torch\n"
    "def split(questions, raw_pred, n):\n"
    "    index = torch.nonzero(questions)[1:, 1]\n"
    "    pred = raw_pred[: index.shape[0]].gather(1, (index % n).view(-1, 1)).flatten()\n"
    "    return pred, index // n\n"
    "def evaluate(model, loader, n):\n"
    "    model.eval()\n"
    "    y_pred, y_truth, seen = torch.Tensor([]), torch.Tensor([]), []\n"
    "    for batch in loader:\n"
    "        out = model(batch)\n"
    "        for i in range(batch.shape[0]):\n"
    "            pred, truth = split(batch[i], out[i], n)\n"
    "            y_truth = torch.cat([y_truth, truth])\n"
    "            seen.append(truth)\n"
    "            y_pred = torch.cat([y_pred, pred])\n"
    "    return y_pred.detach(), y_truth\n"
)


def test_a_helper_of_the_file_hands_back_the_output_element_by_element():
    """`pred, truth = split(batch[i], out[i], n)`: only `pred` is the model output (the
    helper's scope replayed with its parameters bound, ``analysis/helper_returns.py``), and
    the inner loop's joins keep it across the loop over batches that computed it."""
    found = [(f.code, f.location.row) for f in lint(HELPER_SPLIT, "TML502")]
    assert found == [("TML502", 15)]
    detached = HELPER_SPLIT.replace("return pred, index // n", "return pred.detach(), index // n")
    assert lint(detached, "TML502") == []


@pytest.fixture(scope="module")
def fixed_dir(tmp_path_factory):
    """The fixtures after `torchmemlint --fix --unsafe-fixes`."""
    directory = tmp_path_factory.mktemp("fixed")
    for path in FIXTURES.glob("*.py"):
        shutil.copy(path, directory / path.name)
    result = run_cli("--select", "TML5", "--fix", "--unsafe-fixes", ".", cwd=directory)
    assert result.returncode in (0, 1), result.stderr
    return directory


@pytest.mark.slow
def test_fixed_code_parses_and_leaves_no_fixable_finding(fixed_dir):
    remaining = json_findings("--select", "TML5", "--unsafe-fixes", ".", cwd=fixed_dir)
    assert remaining and all(f["fix"] is None for f in remaining)
    for path in fixed_dir.glob("*.py"):
        compile(path.read_text(), str(path), "exec")


# -- the fixes, run -----------------------------------------------------------------------


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def original_and_fixed(fixed_dir):
    target = fixed_dir / "loops_in_functions.py"
    assert target.read_text() != (FIXTURES / "loops_in_functions.py").read_text()
    return load(FIXTURES / "loops_in_functions.py", "loops_original"), load(target, "loops_fixed")


def small_net(seed: int = 0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(4, 3),
    )


def batches(count: int = 3):
    generator = torch.Generator().manual_seed(1)
    return [
        (
            torch.randn(2, 3, 8, 8, generator=generator),
            torch.randint(0, 3, (2,), generator=generator),
        )
        for _ in range(count)
    ]


@pytest.mark.slow
def test_no_grad_fix_keeps_values_and_drops_the_graphs(original_and_fixed):
    original, fixed = original_and_fixed
    loader = batches()
    leaked_loss, leaked_predictions = original.validate(small_net(), loader)
    loss, predictions = fixed.validate(small_net(), loader)
    assert leaked_loss.requires_grad  # what TML501/TML502 report: the graphs are kept
    assert not loss.requires_grad
    assert torch.equal(leaked_loss.detach(), loss)
    assert all(torch.equal(a, b) for a, b in zip(leaked_predictions, predictions))

    images = [x for x, _ in loader]
    leaked = original.embed(small_net(), images)
    clean = fixed.embed(small_net(), images)
    assert leaked.requires_grad and not clean.requires_grad
    assert torch.equal(leaked.detach(), clean)


@pytest.mark.slow
def test_item_and_retain_graph_fixes_train_identically(original_and_fixed, capsys):
    original, fixed = original_and_fixed
    results = []
    for module in (original, fixed):
        model = small_net()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        module.train_epoch(model, batches(), optimizer)
        results.append((capsys.readouterr().out, [p.detach().clone() for p in model.parameters()]))
    (printed, params), (fixed_printed, fixed_params) = results
    assert printed == fixed_printed and printed.startswith("train loss ")
    assert all(torch.equal(a, b) for a, b in zip(params, fixed_params))


def test_eval_message_names_the_switch_the_code_wrote():
    from torchmemlint.engine import lint_source

    code = (
        "import torch\n\n\ndef score(m, loader):\n    m.{switch}\n    outs = []\n"
        "    for x in loader:\n        outs.append(m(x))\n    return outs\n"
    )
    for switch in ("train(False)", "eval()"):
        found = lint_source(code.format(switch=switch), "a.py", Settings(select=("TML501",)))
        assert len(found) == 1
        assert f"after `m.{switch}` with autograd on. `{switch}` does not disable autograd." in (
            found[0].message
        )


# -- where a module's output goes (analysis/sinks.py, TML501 outside evaluation code) -----------
def _reach(code: str, function: str):
    import libcst as cst

    from torchmemlint.analysis.callers import module_call, output_only_sinks
    from torchmemlint.analysis.file import FileAnalysis
    from torchmemlint.analysis.names import Bindings
    from torchmemlint.analysis.training import ScopeFacts

    module = cst.parse_module(code)
    bindings = Bindings()
    bindings.bind_statements(module.body)
    analysis = FileAnalysis(module, bindings, text=code)
    scope = next(s for s in analysis.scopes.scopes if s.name == function)
    facts = ScopeFacts(analysis.scopes, scope)
    event = next(e for e in scope.calls if module_call(facts, e) is not None)
    return output_only_sinks(facts, event, analysis.flow(scope.function))


@pytest.mark.parametrize(
    "body, sinks, escape",
    [
        ("    out = model(x)\n    print(out.argmax(1).tolist())\n", ["`.argmax()`"], None),
        ("    out = model(x)\n    print(out.shape)\n    return out\n", ["`.shape`"], "returned to the caller"),
        ("    outs = []\n    for b in x:\n        outs.append(model(b))\n    return np.stack([o.numpy() for o in outs])\n",
         ["`.numpy()`"], None),
        ("    memory = model.encode(x)\n    ys = model.decode(memory).argmax(-1)\n    return ys\n", ["`.argmax()`"], None),
        ("    out = model(x)\n    keep(out)\n", [], "passed to `keep`"),
        ("    out = model(x)\n    self_.cache = out\n", [], "stored on an object"),
    ],
)
def test_sink_follower_says_where_a_model_output_goes(body, sinks, escape):
    code = "import numpy as np\nimport torch\n\n\ndef run(model, x, self_):\n" + body
    reach = _reach(code, "run")
    assert reach.sinks == sinks
    assert reach.escape == escape
    assert reach.only_sinks == (escape is None)


# -- which functions of a file train (ScopeFacts._trains_inside) ---------------------------------
TRAINS_THROUGH_LOCAL_IMPORT = '''
import torch


def adapt(model, x):
    from torch.autograd import grad
    return grad(model(x).sum(), model.parameters())


def run(model, x):
    return adapt(model, x)
'''


@pytest.mark.parametrize("first", ["adapt", "run"])
def test_the_functions_that_train_do_not_depend_on_which_is_asked_first(first):
    """``adapt`` calls ``torch.autograd.grad`` through its own import, so it and its caller
    ``run`` train, whichever function's facts are built first (each function's calls are read
    with its own names, not with those of the function asked first)."""
    import libcst as cst

    from torchmemlint.analysis.file import FileAnalysis
    from torchmemlint.analysis.names import Bindings
    from torchmemlint.analysis.training import ScopeFacts

    module = cst.parse_module(TRAINS_THROUGH_LOCAL_IMPORT)
    bindings = Bindings()
    bindings.bind_statements(module.body)
    analysis = FileAnalysis(module, bindings, text=TRAINS_THROUGH_LOCAL_IMPORT)
    scopes = {s.name: s for s in analysis.scopes.scopes if s.function is not None}
    order = [first] + [name for name in ("adapt", "run") if name != first]
    facts = {name: ScopeFacts(analysis.scopes, scopes[name]) for name in order}
    assert [c.func for c in facts["run"].training_calls] == ["adapt"]
    assert analysis.scopes._training_functions == {"adapt", "run"}
