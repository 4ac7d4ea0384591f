"""`python -m emgas`: the `emgas` command line."""

import sys

from emgas.streams.cli import main

sys.exit(main())
