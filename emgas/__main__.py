"""`python -m emgas`: the `emgas` command line."""

import sys

from emgas.streams.cli.main import main

if __name__ == "__main__":  # not when multiprocessing's spawn loads it in a child as __mp_main__
    sys.exit(main())
