"""`python -m mqe_model.ogbench`: the `mqe-ogbench` command."""

import sys

from mqe_model.ogbench.cli import main

sys.exit(main())
