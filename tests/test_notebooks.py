"""Jupyter notebooks through the real CLI: found, linted like the same code in a `.py` file,
reported by cell, fixed into a notebook that nbformat validates (outputs and metadata kept)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

# A GPT block with hand-written attention (TML601) and a training loop (TML502, TML501).
IMPORTS = "import math\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
GPT = (
    "class CausalSelfAttention(nn.Module):\n"
    "    def __init__(self, n_embd, n_head, block_size, pdrop):\n"
    "        super().__init__()\n"
    "        self.c_attn = nn.Linear(n_embd, 3 * n_embd)\n"
    "        self.attn_drop = nn.Dropout(pdrop)\n"
    "        self.n_head = n_head\n"
    "\n"
    "    def forward(self, x):\n"
    "        B, T, C = x.size()\n"
    "        q, k, v = self.c_attn(x).split(C, dim=2)\n"
    "        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))\n"
    "        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float('-inf'))\n"
    "        att = F.softmax(att, dim=-1)\n"
    "        att = self.attn_drop(att)\n"
    "        y = att @ v\n"
    "        return y.transpose(1, 2).contiguous().view(B, T, C)"  # no final newline, as Jupyter
)
TRAIN = (
    "def train(model, loader, optimizer):\n"
    "    running_loss = 0.0\n"
    "    for x, y in loader:\n"
    "        optimizer.zero_grad()\n"
    "        loss = F.cross_entropy(model(x), y)\n"
    "        loss.backward()\n"
    "        optimizer.step()\n"
    "        running_loss += loss\n"
    "    print(running_loss / len(loader))\n"
    "\n"
    "\n"
    "def evaluate(model, loader):\n"
    "    model.eval()\n"
    "    correct = 0\n"
    "    for x, y in loader:\n"
    "        out = model(x)\n"
    "        correct += (out.argmax(-1) == y).sum().item()\n"
    "    return correct\n"
)
MAGICS = "%matplotlib inline\n!pip install tqdm\ntorch.nn.Module?\nfiles = !ls\n%%timeit"  # %%timeit: not first


def _notebook(python_cells, extra_magics=True):
    """cells: markdown, imports, magics, GPT (with an output), markdown, training."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    cells = [nbformat.v4.new_markdown_cell("# A GPT block and its training loop")]
    cells.append(nbformat.v4.new_code_cell(python_cells[0]))
    if extra_magics:
        cells.append(nbformat.v4.new_code_cell(MAGICS))
        cells.append(nbformat.v4.new_code_cell("%%bash\necho $((1 + 1))\nls -la"))
    gpt = nbformat.v4.new_code_cell(python_cells[1], execution_count=3)
    gpt.outputs = [nbformat.v4.new_output("stream", name="stdout", text="built\n")]
    cells.append(gpt)
    cells.append(nbformat.v4.new_markdown_cell("Training"))
    cells.append(nbformat.v4.new_code_cell(python_cells[2]))
    nb.cells = cells
    return nb


def _run(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "torchmemlint", "--no-cache", *args],
        cwd=cwd, capture_output=True, text=True,
    )


def _write(path: Path, nb) -> None:
    nbformat.write(nb, str(path))


@pytest.fixture
def project(tmp_path):
    _write(tmp_path / "gpt.ipynb", _notebook([IMPORTS, GPT, TRAIN]))
    (tmp_path / "gpt.py").write_text(IMPORTS + GPT + "\n" + TRAIN)
    return tmp_path


def _cell_of(py_row: int):
    """Where a row of gpt.py lies in gpt.ipynb: imports are cell 2, GPT cell 5, training cell 7."""
    sizes = [(2, IMPORTS.count("\n")), (5, GPT.count("\n") + 1), (7, TRAIN.count("\n"))]
    for cell, size in sizes:
        if py_row <= size:
            return cell, py_row
        py_row -= size
    raise AssertionError("row past the file")


@pytest.mark.slow  # CLI subprocesses
def test_notebook_gets_the_findings_of_its_code_in_a_py_file(project):
    args = ("--output-format", "json", "--select", "ALL")
    as_py = json.loads(_run(*args, "gpt.py", cwd=project).stdout)
    as_nb = json.loads(_run(*args, "gpt.ipynb", cwd=project).stdout)
    codes = sorted(f["code"] for f in as_py)
    assert "TML601" in codes and "TML502" in codes and "TML501" in codes, codes
    assert sorted(f["code"] for f in as_nb) == codes
    expected = set()
    for finding in as_py:
        assert finding["cell"] is None
        cell, row = _cell_of(finding["location"]["row"])
        end_cell, end_row = _cell_of(finding["end_location"]["row"])
        assert end_cell == cell
        expected.add((finding["code"], finding["message"], cell, row,
                      finding["location"]["column"], end_row, finding["end_location"]["column"],
                      row - finding["location"]["row"] + finding["noqa_row"]))
    got = {
        (f["code"], f["message"], f["cell"], f["location"]["row"], f["location"]["column"],
         f["end_location"]["row"], f["end_location"]["column"], f["noqa_row"])
        for f in as_nb
    }
    assert got == expected
    assert all(f["filename"].endswith("gpt.ipynb") for f in as_nb)


@pytest.mark.slow  # CLI subprocesses
def test_text_output_says_cell_and_line_and_directories_find_notebooks(project):
    result = _run("--select", "TML601,TML502", ".", cwd=project)
    lines = result.stdout.splitlines()
    assert result.returncode == 1
    assert any(line.startswith("gpt.ipynb:cell 5:15:13: TML601 ") for line in lines), lines
    assert any(line.startswith("gpt.ipynb:cell 7:8:9: TML502 ") for line in lines), lines
    assert any(line.startswith("gpt.py:19:13: TML601 ") for line in lines), lines
    # a notebook found in a sub-directory too; a .json look-alike is not a notebook
    (project / "sub").mkdir()
    _write(project / "sub" / "again.ipynb", _notebook([IMPORTS, GPT, TRAIN], extra_magics=False))
    (project / "sub" / "data.json").write_text(json.dumps({"cells": []}))
    lines = _run("--select", "TML601", "sub", cwd=project).stdout.splitlines()
    assert lines[0].startswith("sub/again.ipynb:cell 3:15:13: TML601 "), lines
    assert lines[1] == "Found 1 finding."


@pytest.mark.slow  # CLI subprocesses
def test_fix_round_trips_the_notebook(project):
    before_nb = nbformat.read(str(project / "gpt.ipynb"), as_version=4)
    fixed_py = _run("--fix", "--unsafe-fixes", "--select", "ALL", "gpt.py", cwd=project)
    assert "fixed" in fixed_py.stdout
    result = _run("--fix", "--unsafe-fixes", "--select", "ALL", "gpt.ipynb", cwd=project)
    assert result.returncode in (0, 1), result.stderr
    assert "fixed" in result.stdout
    text = (project / "gpt.ipynb").read_text()
    after = nbformat.reads(text, as_version=4)
    nbformat.validate(after)  # raises when the notebook is not valid
    # the code cells hold exactly what --fix made of the same code in a .py file
    code = [cell for cell in after.cells if cell.cell_type == "code"]
    py_cells = [code[0].source, code[3].source, code[4].source]
    assert (py_cells[0] + py_cells[1] + "\n" + py_cells[2]) == (project / "gpt.py").read_text()
    assert "scaled_dot_product_attention" in py_cells[1]
    assert not py_cells[1].endswith("\n")  # Jupyter's form kept: no final line break
    # outputs, metadata, magics, the other cells and the file's layout are kept
    assert code[3].outputs == before_nb.cells[4].outputs and code[3].execution_count == 3
    assert after.metadata == before_nb.metadata
    assert code[1].source == MAGICS and code[2].source == before_nb.cells[3].source
    assert [c.get("id") for c in after.cells] == [c.get("id") for c in before_nb.cells]
    assert text == nbformat.writes(after) + "\n"  # nbformat's own layout: indent 1, sorted keys
    # nothing left to fix; the fixed findings are gone
    again = _run("--select", "ALL", "--output-format", "json", "gpt.ipynb", cwd=project)
    assert not [f for f in json.loads(again.stdout) if f["code"] in ("TML601", "TML502")]


@pytest.mark.slow  # CLI subprocesses
def test_unchanged_notebook_is_not_rewritten_and_diff_shows_cells(project):
    path = project / "plain.ipynb"
    nb = _notebook([IMPORTS, "x = 1", "y = 2\n"])
    raw = json.dumps(nb, indent=2, sort_keys=False)  # another layout: 2 spaces, no final newline
    path.write_text(raw)
    result = _run("--fix", "plain.ipynb", cwd=project)
    assert result.returncode == 0, result.stdout + result.stderr
    assert path.read_text() == raw
    diff = _run("--diff", "--unsafe-fixes", "--select", "TML601", "gpt.ipynb", cwd=project)
    assert diff.returncode == 1
    assert "--- a/gpt.ipynb:cell 5\n+++ b/gpt.ipynb:cell 5\n" in diff.stdout
    assert "+        y = F.scaled_dot_product_attention(" in diff.stdout
    assert '"cells"' not in diff.stdout  # a diff of code, not of JSON


@pytest.mark.slow  # CLI subprocesses
def test_noqa_in_a_cell(project):
    gpt = GPT.replace("        y = att @ v\n", "        y = att @ v  # noqa: TML601\n")
    train = TRAIN.replace("running_loss += loss\n", "running_loss += loss  # noqa\n")
    _write(project / "quiet.ipynb", _notebook([IMPORTS, gpt, train]))
    result = _run("--select", "TML601,TML502", "quiet.ipynb", cwd=project)
    assert result.returncode == 0, result.stdout
    shown = _run("--select", "TML601,TML502", "--ignore-noqa", "quiet.ipynb", cwd=project)
    assert "quiet.ipynb:cell 5:" in shown.stdout and "quiet.ipynb:cell 7:" in shown.stdout


@pytest.mark.slow  # CLI subprocesses
def test_ipython_syntax_is_masked_where_a_statement_starts_only(project):
    # `% 2` continuing an expression and a docstring line ending in `?` are Python, and stay.
    cell = (
        "total = (10\n"
        "         % 3)\n"
        "def f():\n"
        '    """Why?\n'
        '    !not shell"""\n'
        "    %time g()\n"
        "    return total\n"
    )
    _write(project / "m.ipynb", _notebook([IMPORTS, cell, TRAIN]))
    result = _run("--select", "TML502", "--output-format", "json", "m.ipynb", cwd=project)
    findings = json.loads(result.stdout)
    assert [f["code"] for f in findings] == ["TML502"]  # no E999: the masks parse
    assert (findings[0]["cell"], findings[0]["location"]["row"]) == (7, 8)


@pytest.mark.slow  # CLI subprocesses
def test_a_broken_notebook_is_one_line_error(project):
    (project / "bad.ipynb").write_text("{ not json")
    result = _run("bad.ipynb", cwd=project)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr + result.stdout
    line = [ln for ln in result.stdout.splitlines() if "bad.ipynb" in ln]
    assert len(line) == 1 and "E902" in line[0] and "as a notebook" in line[0], result.stdout
    # a syntax error in a cell is reported in that cell
    _write(project / "syntax.ipynb", _notebook([IMPORTS, "def f(:\n    pass", TRAIN]))
    out = _run("--select", "TML601", "syntax.ipynb", cwd=project).stdout
    assert out.startswith("syntax.ipynb:cell 5:1:7: E999 "), out


def test_a_fix_that_would_leave_its_cell_is_refused_and_the_file_kept(project, tmp_path):
    # A fix never crosses cells in practice; the notebook module refuses one that does.
    from torchmemlint.notebook import NotebookError, read_notebook

    text = (project / "gpt.ipynb").read_text()
    notebook = read_notebook("gpt.ipynb", text)
    assert notebook.render(notebook.source) == text  # unchanged: byte for byte
    merged = notebook.source.replace("# torchmemlint-cell 5\n", "")
    with pytest.raises(NotebookError, match="across notebook cells"):
        notebook.render(merged)
    dropped = notebook.source.replace("pass  # torchmemlint-magic 2\n", "")
    with pytest.raises(NotebookError, match="IPython line of cell 3"):
        notebook.render(dropped)


@pytest.mark.slow  # CLI and flake8 subprocesses
def test_cached_findings_keep_their_cell_and_flake8_keeps_to_python_files(project):
    def lint():
        return subprocess.run(
            [sys.executable, "-m", "torchmemlint", "--select", "TML601", "gpt.ipynb"],
            cwd=project, capture_output=True, text=True,
        ).stdout

    first, second = lint(), lint()  # the second run answers from the cache
    assert (project / ".torchmemlint_cache").is_dir()
    assert first == second and first.startswith("gpt.ipynb:cell 5:15:13: TML601 "), second
    flake8 = subprocess.run(
        [sys.executable, "-m", "flake8", "--select", "TML", "."],
        cwd=project, capture_output=True, text=True,
    )
    reported = {line.split(":")[0] for line in flake8.stdout.splitlines()}
    assert reported == {"./gpt.py"}, flake8.stdout + flake8.stderr


@pytest.mark.slow  # CLI subprocesses
def test_standard_input_standing_for_a_notebook(project):
    text = (project / "gpt.ipynb").read_text()

    def run(*args):
        return subprocess.run(
            [sys.executable, "-m", "torchmemlint", "--select", "TML601", *args,
             "--stdin-filename", "gpt.ipynb", "-"],
            cwd=project, input=text, capture_output=True, text=True,
        )

    linted = run()
    assert linted.stdout.startswith("gpt.ipynb:cell 5:15:13: TML601 "), linted.stdout
    fixed = run("--fix", "--unsafe-fixes")
    notebook = nbformat.reads(fixed.stdout, as_version=4)  # the fixed notebook on stdout
    nbformat.validate(notebook)
    assert "scaled_dot_product_attention" in notebook.cells[4].source
    assert "Fixed 1 finding" in fixed.stderr


def test_which_cells_are_python(tmp_path):
    # In-process: what the joined source holds for each kind of cell.
    from torchmemlint.notebook import read_notebook

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("%%time\nloss = model(x).sum()"),  # Python below the magic
        nbformat.v4.new_code_cell("%%writefile train.py\nimport torch"),  # writes a file: skipped
        nbformat.v4.new_code_cell("%%bash\nls"),  # another language: skipped
        nbformat.v4.new_raw_cell("import torch"),  # not code
        nbformat.v4.new_code_cell("for i in range(3):\n    !echo $i\n    %time f(i)"),
    ]
    notebook = read_notebook("n.ipynb", nbformat.writes(nb))
    assert "loss = model(x).sum()" in notebook.source and "train.py" not in notebook.source
    assert "ls" not in notebook.source.split() and "import torch" not in notebook.source
    compile(notebook.source, "n.ipynb", "exec")  # the masks parse, indented ones too
    assert [cell.number for cell in notebook.cells] == [1, 5]
    fixed = notebook.source.replace("loss = model(x).sum()", "loss = model(x).mean()")
    after = nbformat.reads(notebook.render(fixed), as_version=4)
    assert after.cells[0].source == "%%time\nloss = model(x).mean()"
    assert after.cells[4].source == nb.cells[4].source and after.cells[1:4] == nb.cells[1:4]
    # a notebook in another language is not linted
    nb.metadata["kernelspec"] = {"name": "ir", "display_name": "R", "language": "R"}
    assert read_notebook("r.ipynb", nbformat.writes(nb)).source == ""


@pytest.mark.slow  # CLI subprocesses
def test_structured_reports_put_a_notebook_finding_at_1_1_as_ruff_does(project):
    github = _run("--select", "TML601", "--output-format", "github", ".", cwd=project).stdout
    notebook_line = next(line for line in github.splitlines() if "gpt.ipynb" in line)
    assert ",line=1,col=1,endLine=1,endColumn=1" in notebook_line, notebook_line
    assert "cell 5:15:13: Eager attention" in notebook_line
    python_line = next(line for line in github.splitlines() if "gpt.py" in line)
    assert ",line=19,col=13," in python_line  # a .py file keeps its rows
    sarif = json.loads(_run("--select", "TML601", "--unsafe-fixes", "--output-format", "sarif",
                            "gpt.ipynb", cwd=project).stdout)
    (result,) = sarif["runs"][0]["results"]
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == 1
    assert "fixes" not in result  # edits in cell coordinates would break the JSON file
