"""Moved to ``torchmemlint.analysis.names``; kept so that existing imports keep working."""

from torchmemlint.analysis.names import *  # noqa: F401,F403
from torchmemlint.analysis.names import Bindings, canonical, dotted_name  # noqa: F401
