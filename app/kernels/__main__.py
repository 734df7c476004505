"""`python -m app.kernels`: the kernel benchmark (see app/kernels/bench.py)."""

import sys

from app.kernels.bench import main

sys.exit(main())
