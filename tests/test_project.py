"""The project index (torchmemlint/project.py): what one file of a project says to the others.

Driven through the real CLI in subprocesses over small projects in the forms real code takes:
a package with relative and star imports, a subclass in another file, a training script beside
the package, a quantization subclass that names attributes in strings, a feature extractor.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import torchmemlint.project as project_module
from torchmemlint.project import ProjectIndex, module_name, summarize

pytestmark = pytest.mark.slow  # CLI subprocesses

BLOCK = textwrap.dedent(
    """\
    import torch.nn as nn


    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3)
            self.pool = nn.MaxPool2d(2)
            self.act = nn.Hardtanh()

        def forward(self, x):
            return self.act(self.pool(self.conv(x)))
    """
)


def run(args, cwd):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "TORCHMEMLINT"))}
    result = subprocess.run(
        [sys.executable, "-m", "torchmemlint", *args], cwd=cwd, capture_output=True, text=True,
        env=env, timeout=120,
    )
    assert "Traceback" not in result.stderr, result.stderr
    return result


def fixable(cwd, *paths, extra=()):
    """{attribute: whether its TML101 finding carries a fix} for the run over ``paths``."""
    result = run(["--no-cache", "--select", "TML101", "--output-format", "json", *extra, *paths], cwd)
    found = {}
    for item in json.loads(result.stdout):
        attribute = item["message"].split("`")[1].split(".", 1)[1]
        found[attribute] = item["fix"] is not None
    return found


@pytest.fixture
def package(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from .blocks import *\n")
    (pkg / "blocks.py").write_text(BLOCK)
    return tmp_path


def test_alone_every_attribute_is_fixable(package):
    assert fixable(package, "pkg") == {"pool": True, "act": True}


@pytest.mark.parametrize("target", ["pkg", "pkg/blocks.py"])
def test_a_subclass_in_another_file_that_deletes_the_attribute_keeps_it(package, target):
    (package / "pkg" / "small.py").write_text(
        "from .blocks import Block\n\n\nclass Small(Block):\n"
        "    def __init__(self):\n        super().__init__()\n        del self.pool\n"
    )
    # Named alone, blocks.py is still read with its package: the subclass is its neighbour.
    assert fixable(package, target) == {"pool": False, "act": True}


def test_a_subclass_through_a_star_import_and_a_re_export(package):
    (package / "pkg" / "deep").mkdir()
    (package / "pkg" / "deep" / "__init__.py").write_text("")
    (package / "pkg" / "deep" / "variant.py").write_text(
        "from .. import *\n\n\nclass Variant(Block):\n    def forward(self, x):\n"
        "        return self.act(self.conv(x))\n"
    )
    # Variant reads self.act and self.conv (its own forward): act is reached, pool is not.
    assert fixable(package, "pkg") == {"pool": True, "act": False}


def test_quantization_fusion_names_the_attribute_in_a_string(package):
    (package / "pkg" / "quantized.py").write_text(
        "import torch\nfrom .blocks import Block\n\n\nclass QBlock(Block):\n"
        "    def fuse_model(self):\n"
        "        torch.ao.quantization.fuse_modules(self, [['conv', 'act']], inplace=True)\n"
    )
    assert fixable(package, "pkg") == {"pool": True, "act": False}


def test_a_training_script_beside_the_package_reads_the_attribute(package):
    (package / "train.py").write_text(
        "import torch\nfrom pkg import Block\n\nmodel = Block()\nmodel.pool.register_forward_hook(print)\n"
    )
    assert fixable(package, "pkg", "train.py") == {"pool": False, "act": True}
    # Given alone, the package does not see the script: nothing says it belongs to the run.
    assert fixable(package, "pkg") == {"pool": True, "act": True}


def test_scripts_outside_a_package_see_their_siblings(tmp_path):
    (tmp_path / "model.py").write_text(BLOCK)
    (tmp_path / "evaluate.py").write_text(
        "from model import *\n\nnet = Block()\nprint(getattr(net, 'act'))\n"
    )
    assert fixable(tmp_path, "model.py") == {"pool": True, "act": False}


@pytest.mark.parametrize(
    "walker",
    [
        "from torchvision.models._utils import IntermediateLayerGetter\n\n"
        "def backbone(m):\n    return IntermediateLayerGetter(m, {'conv': 'out'})\n",
        "import timm\n\nfeatures = timm.create_model('resnet18', features_only=True)\n",
        "def stem(m):\n    return list(m.children())[:3]\n",
    ],
    ids=["IntermediateLayerGetter", "features_only", "children"],
)
def test_a_walk_over_the_children_in_order_keeps_every_module(package, walker):
    (package / "pkg" / "features.py").write_text(walker)
    assert fixable(package, "pkg") == {"pool": False, "act": False}


def test_look_alikes_elsewhere_do_not_withhold_the_fix(package):
    (package / "pkg" / "other.py").write_text(
        textwrap.dedent(
            """\
            import torch.nn as nn
            import torch.nn.functional as F


            class Other(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.pool = nn.AvgPool2d(2)  # its own attribute of the same name

                def forward(self, x):
                    y = F.hardtanh(self.pool(x))  # F.<name>, nn.<name>: module functions
                    return nn.functional.max_pool2d(y, 2)
            """
        )
    )
    (package / "train.py").write_text("from pkg import Block\n\nmodel = Block()\nprint(model.conv)\n")
    assert fixable(package, "pkg", "train.py") == {"pool": True, "act": True}


def test_an_unparsable_neighbour_withholds_the_fix(package):
    (package / "pkg" / "broken.py").write_text("def (:\n")
    assert fixable(package, "pkg/blocks.py") == {"pool": False, "act": False}


def test_unsafe_fixes_leave_the_subclass_working(package):
    (package / "pkg" / "small.py").write_text(
        "from .blocks import Block\n\n\nclass Small(Block):\n"
        "    def __init__(self):\n        super().__init__()\n        del self.pool\n"
    )
    result = run(["--no-cache", "--select", "TML101", "--fix", "--unsafe-fixes", "pkg"], package)
    assert result.returncode == 1  # the pool finding stays
    fixed = (package / "pkg" / "blocks.py").read_text()
    assert "self.pool = nn.MaxPool2d(2)" in fixed  # the subclass still deletes it
    assert "self.act" not in fixed and "hardtanh(" in fixed


def test_an_edit_elsewhere_relints_only_the_files_it_concerns(package):
    for index in range(3):
        (package / "pkg" / f"plain_{index}.py").write_text(f"import torch\nx{index} = torch.ones(3)\n")
    small = package / "pkg" / "small.py"
    small.write_text("from .blocks import Block\n\n\nclass Small(Block):\n    pass\n")
    args = ["--select", "TML101", "--output-format", "json", "pkg"]
    cold = run(args, package)
    cache = package / ".torchmemlint_cache"
    stamps = {path: path.stat().st_mtime_ns for path in cache.glob("*/*/*.json")}
    assert len(stamps) == 6  # __init__, blocks, small and three plain files
    # small.py now deletes the pool: small.py changed, and blocks.py's findings depend on it.
    small.write_text(small.read_text().replace("    pass\n", "    def __init__(self):\n        super().__init__()\n        del self.pool\n"))
    warm = run(args, package)
    rewritten = sorted(
        path.name for path, stamp in stamps.items() if path.stat().st_mtime_ns != stamp
    )
    assert len(rewritten) == 2, rewritten  # small.py and blocks.py, no other file
    by_attribute = {item["message"].split("`")[1]: item["fix"] is not None for item in json.loads(warm.stdout)}
    assert by_attribute == {"self.pool": False, "self.act": True}
    assert json.loads(cold.stdout) != json.loads(warm.stdout)


# -- the index itself ------------------------------------------------------------------------
def test_module_names_follow_the_packages(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "__init__.py").write_text("")
    (tmp_path / "a" / "b" / "__init__.py").write_text("")
    assert module_name(str(tmp_path / "a" / "b" / "c.py")) == ("a.b.c", "a.b")
    assert module_name(str(tmp_path / "a" / "b" / "__init__.py")) == ("a.b", "a.b")
    assert module_name(str(tmp_path / "script.py")) == ("script", "")


def test_relative_imports_resolve_to_project_classes(tmp_path):
    (tmp_path / "p" / "q").mkdir(parents=True)
    for init in ("p/__init__.py", "p/q/__init__.py"):
        (tmp_path / init).write_text("")
    (tmp_path / "p" / "base.py").write_text("class Base:\n    pass\n")
    (tmp_path / "p" / "q" / "__init__.py").write_text("from ..base import Base as Root\n")
    (tmp_path / "p" / "q" / "leaf.py").write_text("from . import Root\n\nclass Leaf(Root):\n    pass\n")
    index = ProjectIndex.for_files([str(tmp_path / "p" / "q" / "leaf.py")])
    leaf = index.module_of(str(tmp_path / "p" / "q" / "leaf.py"))
    base = index.module_of(str(tmp_path / "p" / "base.py"))
    assert leaf is not None and base is not None  # base.py came as a neighbour
    found = index.resolve_class(leaf, "Root")
    assert found is not None and found[1].name == "Base" and found[0] is base
    assert [klass.name for _, klass in index.subclasses(base, "Base")] == ["Leaf"]


def test_importers_of_a_function(tmp_path):
    """Who may call a top-level function of ``p/layers.py``: a relative import of it, a
    re-export of it by the package, an import of the module, a star import; not an import of
    another of its names, nor the module itself."""
    (tmp_path / "p").mkdir()
    files = {
        "p/__init__.py": "from .layers import shared\n",
        "p/layers.py": "def leaky():\n    pass\n\ndef other():\n    pass\n\ndef shared():\n    pass\n\nleaky()\n",
        "p/a.py": "from .layers import other\n",
        "p/b.py": "from . import layers as L\n",
        "p/c.py": "from .layers import *\n",
        "p/d.py": "from p.layers import other as leaky\n",  # another name, bound as `leaky`
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    layers = str(tmp_path / "p" / "layers.py")
    index = ProjectIndex.for_files([layers])
    names = lambda name: sorted(Path(m.path).name for m in index.importers(layers, name))  # noqa: E731
    assert names("leaky") == ["b.py", "c.py"]
    assert names("shared") == ["__init__.py", "b.py", "c.py"]
    assert names(None) == ["__init__.py", "a.py", "b.py", "c.py", "d.py"]
    alone = ProjectIndex.for_files([layers], neighbours=False)
    assert alone.importers(layers, "leaky") == []


def test_importers_read_only_the_files_that_spell_the_name(tmp_path, monkeypatch):
    """``importers`` of a name summarizes only the files whose text spells it, the module's
    last part or a star import, and answers as the map of every file's imports does (an
    index made of every summary); a file that does not parse counts only where it spells one."""
    (tmp_path / "p" / "sub").mkdir(parents=True)
    files = {
        "p/__init__.py": "from .layers import shared\nfrom . import sub\n",
        "p/layers.py": "def leaky():\n    pass\n\ndef other():\n    pass\n\ndef shared():\n    pass\n",
        "p/a.py": "from .layers import other\n",
        "p/b.py": "from . import layers as L\n",
        "p/c.py": "from .layers import \\\n    *\n",
        "p/d.py": "from p.layers import other as leaky\n",
        "p/e.py": "import p.layers\n",
        "p/f.py": "from p import shared as s\n",  # the package's re-export
        "p/sub/__init__.py": "from ..layers import leaky as relu\n",
        "p/sub/g.py": "x = 1  # leaky, in a comment: not read (the name alone)\n",
        "p/broken_quiet.py": "def (:\n",
        "p/broken_leaky.py": "def (: leaky\n",  # (the name alone: no import of the module)
        "p/broken_layers.py": "def (: from .layers\n",
        "p/h.py": "x = 'layers_extra'  # a longer word: not read\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    paths = [str(tmp_path / name) for name in files]
    layers = str(tmp_path / "p" / "layers.py")
    lazy = ProjectIndex.for_files(paths)
    whole = ProjectIndex([summarize(path, Path(path).read_text()) for path in paths])
    names = lambda index, path, name: sorted(  # noqa: E731
        str(Path(m.path).relative_to(tmp_path)) for m in index.importers(path, name)
    )
    summarized = []
    real = project_module.summarize
    monkeypatch.setattr(project_module, "summarize", lambda path, *a, **k: summarized.append(path) or real(path, *a, **k))
    assert names(lazy, layers, "leaky") == ["p/b.py", "p/broken_layers.py", "p/c.py", "p/sub/__init__.py"]
    unread = set(files) - {str(Path(path).relative_to(tmp_path)) for path in summarized}
    # (no word `layers`, no star import)
    assert unread == {"p/f.py", "p/broken_quiet.py", "p/broken_leaky.py", "p/sub/g.py", "p/h.py"}
    for path in paths:
        for name in ("leaky", "other", "shared", "sub", "relu", "s"):
            last = module_name(path)[0].rpartition(".")[2]
            words = {last, name} if path.endswith("__init__.py") else {last}
            expected = [  # (a file that does not parse: an importer only where it has one of the words)
                m for m in names(whole, path, name) if "broken" not in m or words & set(re.findall(r"\w+", files[m]))
            ]
            assert names(lazy, path, name) == expected, (path, name)
    assert names(lazy, layers, None) == names(whole, layers, None)  # any name: every file, the broken ones too
    assert "p/broken_quiet.py" in names(lazy, layers, None)
    mapped = ProjectIndex.for_files(paths)  # every file summarized first (any name): the same answers
    mapped.importers(layers, None)
    for path in paths:
        for name in ("leaky", "other", "shared", "sub", "relu", "s"):
            assert names(mapped, path, name) == names(lazy, path, name), (path, name)


def test_a_summary_reads_what_others_may_reach():
    summary = summarize("m.py", "import torch.nn as nn\nfrom x import y\n\nclass A(nn.Module):\n"
                        "    def f(self):\n        self.a = 1\n        del self.b\n        return other.c, nn.d, y.e\n")
    assert summary.classes["A"].assigned == {"a"} and summary.classes["A"].read == {"b"}
    assert "c" in summary.foreign_reads and "d" not in summary.foreign_reads and "e" not in summary.foreign_reads
    assert not summary.ordered_walk
