"""The `emgas` command's entry point: what a command needs started before
the command line's imports, then the command line (`main`).

A worker's encoder (semantic seeds) takes 0.2-0.3 s to load, most of it
building the ONNX session outside the interpreter's lock. Loaded by the
warm-up after the worker's imports (about 0.5 s), it was the last thing a
takeover's first answer waited for; started here, on a thread of its own,
it builds beside those imports on the other core. Only where semantic
seeds are on by default: a worker whose environment sets anything of
`EMGAS_ACTIVATION` leaves it to the warm-up, which reads the settings."""

from __future__ import annotations

import os
import sys
import threading


def main() -> int:
    if _command(sys.argv[1:]) == "worker" and not any(name.upper().startswith("EMGAS_ACTIVATION") for name in os.environ):
        threading.Thread(target=_preload_encoder, name="emgas-encoder", daemon=True).start()
    from emgas.streams.cli.main import main as run

    return run()


def _command(argv: list[str]) -> str | None:
    """The command named on the command line (its first word not an option)."""
    return next((word for word in argv if not word.startswith("-")), None)


def _preload_encoder() -> None:
    try:
        from emgas.state.encoder import preload

        preload()
    except Exception:  # noqa: BLE001 - the warm-up loads it again, and says why it cannot
        pass
