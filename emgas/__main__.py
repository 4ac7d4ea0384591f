"""`python -m emgas`, and the `emgas` command (`console`)."""

import gc
import sys


def console() -> int:
    """The `emgas` command line. The cyclic collector is off while its
    modules load: they make no cyclic garbage, yet the collector traversed
    what they made again and again, 20-25 ms of every command's start (a
    worker's takeover's too). `main` freezes what they made and turns it
    back on (`_collect_less`)."""
    gc.disable()
    from emgas.streams.cli.main import main

    return main()


if __name__ == "__main__":  # not when multiprocessing's spawn loads it in a child as __mp_main__
    sys.exit(console())
