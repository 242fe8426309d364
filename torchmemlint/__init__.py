"""torchmemlint: find and fix GPU-memory anti-patterns in PyTorch source."""

__version__ = "0.1.0"
