"""`python -m server`: the same as `mqe-serve`."""

import sys

from server.cli import main

sys.exit(main())
