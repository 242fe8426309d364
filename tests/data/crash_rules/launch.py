"""Run a program (torchmemlint, flake8) with the test-only rules in ``rules/`` registered.

``python launch.py MODULE ARGS...`` is ``python -m MODULE ARGS...`` after adding this
directory's ``rules/`` to the rule package: rules that raise on purpose, so the isolation tests
stay valid whatever bugs the real rules have or lose.
"""

import os
import runpy
import sys

import torchmemlint.rules

HERE = os.path.dirname(os.path.abspath(__file__))
torchmemlint.rules.__path__.append(os.path.join(HERE, "rules"))
sys.argv = sys.argv[1:]
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
