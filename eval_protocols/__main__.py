"""`python -m eval_protocols` runs `mqe-report`."""

import sys

from eval_protocols.cli import main

sys.exit(main())
