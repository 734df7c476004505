"""`python -m app` is the same as the `llambda` command."""

import sys

from app.cli import main

sys.exit(main())
