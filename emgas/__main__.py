"""`python -m emgas`: the `emgas` command line."""

import sys

from emgas.streams.cli.main import main

sys.exit(main())
