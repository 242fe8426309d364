"""``python -m torchmemlint`` and the ``torchmemlint`` command.

The CLI's modules are imported here, inside the Ctrl-C handling: a Ctrl-C while they are still
being imported ends as one at any later moment does, with "torchmemlint: interrupted" and exit
code 130, not a traceback."""

import os
import sys


def run() -> None:
    try:
        from torchmemlint.cli import main
    except KeyboardInterrupt:
        # nothing is open or written yet; a half-imported package must not run exit handlers
        sys.stderr.write("torchmemlint: interrupted\n")
        sys.stderr.flush()
        os._exit(130)
    main(prog_name="torchmemlint")


if __name__ == "__main__":
    run()
