"""Run a program (flake8, torchmemlint) with the test-only rules in ``rules/`` registered.

``python launch.py MODULE ARGS...`` is ``python -m MODULE ARGS...`` after adding this
directory's ``rules/`` to the rule package, so the surface tests can exercise a rule that is
off by default, has options and has an unsafe fix, whatever the real rule set holds.
"""

import os
import runpy
import sys

import torchmemlint.rules

HERE = os.path.dirname(os.path.abspath(__file__))
torchmemlint.rules.__path__.append(os.path.join(HERE, "rules"))
sys.argv = sys.argv[1:]
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
