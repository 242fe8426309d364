"""Errors of dynamic mode; each carries a one-line message for the CLI."""

from __future__ import annotations


class DynamicError(Exception):
    """A dynamic-mode failure the user can act on (bad target, bad model)."""


class NoTensorOutputError(DynamicError):
    """The model's forward returned nothing a loss can be computed from."""


class ProfileTimeout(BaseException):
    """``--timeout`` ran out.  A BaseException, so that the model's own
    ``except Exception`` blocks cannot swallow it."""

    def __init__(self, seconds: float) -> None:
        super().__init__("gave up after %g s (--timeout)" % seconds)
        self.seconds = seconds


# What the user's code may raise that is not an Exception and must not end the
# run silently (sys.exit(0) would exit 0) or with a traceback.
USER_EXITS = (SystemExit, KeyboardInterrupt)


def user_exit(exc: BaseException, doing: str) -> DynamicError:
    """A one-line error for ``sys.exit()`` / ``KeyboardInterrupt`` raised by the model's code."""
    if isinstance(exc, SystemExit):
        return DynamicError("the model's code called sys.exit(%r) while %s" % (exc.code, doing))
    return DynamicError("interrupted (KeyboardInterrupt) while %s" % doing)
