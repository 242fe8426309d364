"""TML403 through a base class in another file of the project, in the form OpenMMLab's
backbones take (Res2Net's ``Bottle2neck`` over ResNet's ``Bottleneck``): the norm config is
``self.norm_cfg``, set by the base class's ``__init__`` from its parameter's default
``dict(type='BN')`` and reached through ``super().__init__(inplanes, planes, **kwargs)``; the
layers are registered with ``self.add_module(self.norm1_name, norm1)`` and read through the
base class's ``@property def norm1(self): return getattr(self, self.norm1_name)``, or kept in
``self.bns = nn.ModuleList(bns)`` and called as ``self.bns[i]``. Look-alikes stay quiet: the
subclass passes ``norm_cfg=dict(type='GN')`` (by keyword, or its own parameter's default), the
checkpointed function touches no norm. A subclass that only overrides ``forward`` inherits the
constructor whole (``self.norm1`` registered there, ``self.bn2`` set there); one whose
``__init__`` passes GroupNorm up is quiet.

Each case is a package of two files (the base class in one, the subclass in the other, imported
relatively); the CLI runs once, as a subprocess, over all of them, and each file must report
exactly the rows marked ``# expect: TML403``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict, Set, Tuple

import pytest

from marked_cases import marked

pytestmark = pytest.mark.slow  # starts the CLI

BASE = '''
    import torch.nn as nn
    from mmcv.cnn import build_conv_layer, build_norm_layer


    class Bottleneck(nn.Module):
        expansion = 4

        def __init__(self, inplanes, planes, stride=1, with_cp=False, conv_cfg=None, norm_cfg=dict(type='BN')):
            super(Bottleneck, self).__init__()
            self.inplanes = inplanes
            self.planes = planes
            self.with_cp = with_cp
            self.conv_cfg = conv_cfg
            self.norm_cfg = norm_cfg
            self.norm1_name, norm1 = build_norm_layer(norm_cfg, planes, postfix=1)
            self.conv1 = build_conv_layer(conv_cfg, inplanes, planes, kernel_size=1, bias=False)
            self.add_module(self.norm1_name, norm1)
            self.bn2 = nn.BatchNorm2d(planes)
            self.relu = nn.ReLU(inplace=True)

        @property
        def norm1(self):
            return getattr(self, self.norm1_name)
'''

# the subclass's file; {super} is its call of the base class's __init__, {params} its extra
# parameters, {body} what its checkpointed closure runs
SUB = '''
    import torch
    import torch.nn as nn
    import torch.utils.checkpoint as cp
    from mmcv.cnn import build_conv_layer, build_norm_layer

    from .resnet import Bottleneck as _Bottleneck


    class Bottle2neck(_Bottleneck):
        def __init__(self, inplanes, planes, scales=4{params}, **kwargs):
            {super}
            width = planes
            self.norm1_name, norm1 = build_norm_layer(self.norm_cfg, width * scales, postfix=1)
            self.conv1 = build_conv_layer(self.conv_cfg, self.inplanes, width * scales, kernel_size=1, bias=False)
            self.add_module(self.norm1_name, norm1)
            convs = []
            bns = []
            for i in range(scales - 1):
                convs.append(build_conv_layer(self.conv_cfg, width, width, kernel_size=3, padding=1, bias=False))
                bns.append(build_norm_layer(self.norm_cfg, width, postfix=i + 1)[1])
            self.convs = nn.ModuleList(convs)
            self.bns = nn.ModuleList(bns)
            self.scales = scales
            self.width = width

        def forward(self, x):
            def _inner_forward(x):
                out = self.conv1(x)
                {body}
                return out

            if self.with_cp and x.requires_grad:
                out = cp.checkpoint(_inner_forward, x, use_reentrant=False){expect}
            else:
                out = _inner_forward(x)
            return self.relu(out)
'''

# a subclass that only overrides `forward`: the modules are the inherited constructor's;
# {init} is an `__init__` of its own, or nothing
FORWARD_ONLY = '''
    import torch.utils.checkpoint as cp

    from .resnet import Bottleneck


    class CheckpointedBottleneck(Bottleneck):
        {init}
        def forward(self, x):
            def _inner_forward(x):
                out = self.conv1(x)
                {body}
                return out

            return cp.checkpoint(_inner_forward, x, use_reentrant=False){expect}
'''

KEPT = "super(Bottle2neck, self).__init__(inplanes, planes, **kwargs)"
NORM1 = "out = self.relu(self.norm1(out))"
SPLIT = (
    "spx = torch.split(out, self.width, 1)\n"
    "            sp = self.convs[0](spx[0])\n"
    "            out = self.relu(self.bns[0](sp))"
)
FOUND = "  # expect: TML403"

CASES: Dict[str, Dict[str, str]] = {
    # the base class's default BN, read through the base class's property
    "property": dict(params="", super=KEPT, body=NORM1, expect=FOUND),
    # ... through the module list only
    "module_list": dict(params="", super=KEPT, body=SPLIT, expect=FOUND),
    # Python 3's super(), and the subclass chooses SyncBN by its own parameter's default
    "own_default_syncbn": dict(
        params=", norm_cfg=dict(type='SyncBN')", body=NORM1, expect=FOUND,
        super="super().__init__(inplanes, planes, norm_cfg=norm_cfg, **kwargs)",
    ),
    # look-alikes: the subclass passes GroupNorm; its own default is GroupNorm; no norm run
    "passes_gn": dict(
        params="", body=NORM1 + "\n            " + SPLIT, expect="",
        super="super(Bottle2neck, self).__init__(inplanes, planes, norm_cfg=dict(type='GN', num_groups=8), **kwargs)",
    ),
    "own_default_gn": dict(
        params=", norm_cfg=dict(type='GN', num_groups=8)", body=SPLIT, expect="",
        super="super().__init__(inplanes, planes, norm_cfg=norm_cfg, **kwargs)",
    ),
    "no_norm": dict(params="", super=KEPT, body="out = self.relu(self.convs[0](out))", expect=""),
    # the constructor is inherited whole: `self.norm1` registered there, `self.bn2` set there
    "inherited_init_property": dict(template=FORWARD_ONLY, init="", body=NORM1, expect=FOUND),
    "inherited_init_attribute": dict(template=FORWARD_ONLY, init="", body="out = self.bn2(out)", expect=FOUND),
    "inherited_init_no_norm": dict(template=FORWARD_ONLY, init="", body="out = self.relu(out)", expect=""),
    # ... but an `__init__` that passes GroupNorm up: the base's modules are not the default ones
    "init_passes_gn": dict(
        template=FORWARD_ONLY, body=NORM1, expect="",
        init=(
            "def __init__(self, inplanes, planes, **kwargs):\n"
            "        super().__init__(inplanes, planes, norm_cfg=dict(type='GN', num_groups=8), **kwargs)\n"
        ),
    ),
}


def _sources(case: Dict[str, str]) -> Dict[str, str]:
    return {
        "__init__.py": "",
        "resnet.py": textwrap.dedent(BASE),
        "res2net.py": textwrap.dedent(case.get("template", SUB)).format(**case),
    }


@pytest.fixture(scope="module")
def found(tmp_path_factory) -> Dict[Tuple[str, str], Set[Tuple[int, str]]]:
    root = tmp_path_factory.mktemp("checkpoint_inherited")
    for name, case in CASES.items():
        package = root / name
        package.mkdir()
        for filename, source in _sources(case).items():
            (package / filename).write_text(source, encoding="utf-8")
    command = [sys.executable, "-m", "torchmemlint", "check", str(root), "--no-cache", "--exit-zero",
               "--select", "TML403", "--output-format", "json"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    findings: Dict[Tuple[str, str], Set[Tuple[int, str]]] = {}
    for finding in json.loads(result.stdout):
        path = Path(finding["filename"])
        findings.setdefault((path.parent.name, path.name), set()).add((finding["location"]["row"], finding["code"]))
    return findings


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(found, name):
    for filename, source in _sources(CASES[name]).items():
        assert found.get((name, filename), set()) == marked(source), filename


def test_the_base_class_file_alone_keeps_the_finding_local(tmp_path):
    """Linted without its base class's file, the subclass cannot know the default: quiet
    (the finding needs the project's other file, not a spelling)."""
    sources = _sources(CASES["property"])
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "res2net.py").write_text(sources["res2net.py"])
    command = [sys.executable, "-m", "torchmemlint", "check", str(package), "--no-cache", "--exit-zero",
               "--select", "TML403", "--output-format", "json"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []
