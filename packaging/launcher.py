"""Entry script of the frozen bundle (build.spec): the same as the `llambda` command."""

import sys

from app.cli import main

if __name__ == "__main__":
    sys.exit(main())
