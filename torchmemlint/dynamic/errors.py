"""Errors of dynamic mode; each carries a one-line message for the CLI."""

from __future__ import annotations


class DynamicError(Exception):
    """A dynamic-mode failure the user can act on (bad target, bad model)."""


class NoTensorOutputError(DynamicError):
    """The model's forward returned nothing a loss can be computed from."""
