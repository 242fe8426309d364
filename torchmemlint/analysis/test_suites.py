"""Is a function one a test runner collects (pytest, unittest), rather than evaluation code?

TML501 leaves test-suite functions alone: they run modules on purpose, with autograd on when
they check gradients. A function named ``test*`` (``test_shape``, ``_test_outputs``,
``testShape``) is one at the module's top level, or as a method of a class named ``Test*`` /
``*Test`` / ``*Tests`` or deriving from a ``*TestCase`` (``unittest.TestCase``,
``absltest.TestCase``). The same name on a model's or a trainer's class (SPACEL's
``SpointModel.test_st``, a ``Trainer.test()``) is that class's evaluation code, judged like any
other (``tests/test_tml501_detached_values.py``). A top-level one counts only in a file pytest
collects (``test_*.py``, ``*_test.py``):
``def test(model, loader)`` in a training script is its evaluation (``collected_test``), and any
other function named ``test*`` that no test runner collects where it is (GDmicro's
``test_unknown(model, ...)`` in ``gcn_model.py``) is judged as any code: reported after the
model's ``.eval()``, unless it asserts, as tests do (``def test_forward(model, x): ... assert
out.shape == x.shape``: ``suite_test``).
"""

from __future__ import annotations

import re
from typing import Any

import libcst as cst

from torchmemlint.analysis.names import dotted_name
from torchmemlint.tree import nodes_of

TEST_NAME = re.compile(r"_*test(?:_|[A-Z]|$)")
_TEST_CLASS = re.compile(r"^Test|Tests?$|TestCase$")


def test_suite_function(scope: Any) -> bool:
    """``scope`` (an ``autograd.Scope``: ``name``, ``owner``) is a function a test runner collects."""
    if not TEST_NAME.match(scope.name or ""):
        return False
    owner = scope.owner
    if owner is None:
        return True
    node = owner.node
    return _TEST_CLASS.search(node.name.value) is not None or any(
        _TEST_CLASS.search((dotted_name(base.value) or "").rsplit(".", 1)[-1]) is not None for base in node.bases
    )


_TEST_FILE = re.compile(r"(?:^|[/\\])(?:test_[^/\\]*|[^/\\]*_test)\.py$")  # what pytest collects


def collected_test(facts: Any) -> bool:
    """The scope of ``facts`` (a ``ScopeFacts``) is a test-suite function
    (``test_suite_function``) a test runner collects where it is: a method of a test class,
    or a top-level function of a test file."""
    scope, links = facts.scope, facts.walk.links
    if not test_suite_function(scope):
        return False
    return scope.owner is not None or (links is not None and _TEST_FILE.search(links.path) is not None)


def suite_test(facts: Any) -> bool:
    """``collected_test``, or a function named as a test that asserts something, as tests do,
    wherever it is (a ``conftest.py`` helper, an example's ``test_forward``)."""
    scope = facts.scope
    if collected_test(facts):
        return True
    return test_suite_function(scope) and scope.function is not None and any(nodes_of(scope.function, cst.Assert))
