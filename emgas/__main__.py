"""`python -m emgas`: the `emgas` command line."""

import sys

from emgas.streams.cli.main import main

if __name__ == "__main__":  # not when a spawned process (replay side by side) loads it as __mp_main__
    sys.exit(main())
