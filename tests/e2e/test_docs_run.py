"""The docs' examples run as written: README's tour, then usage.md's and agents.md's blocks.

Every sh and python block of those pages (`tests.support.doc_blocks`), in
order, in one bash session, as a reader pasting them would: a fresh
EMGAS_HOME, `emgas` on the PATH, `.venv` beside the working directory,
no EMGAS_BROKER. Each block must exit 0 and print what its marker
expects (awaited: a background worker's line comes when it does); a
block marked skip says why it does not run.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from emgas.testing import free_port
from tests.support.doc_blocks import PAGES, ROOT, Block, blocks, unexpected

pytestmark = pytest.mark.e2e
BLOCK_TIMEOUT_S = 240  # the first block waits for Kafka and a worker to start


class Session:
    """One bash process fed the blocks one by one; every process it starts is in its process group."""

    def __init__(self, work: Path, env: dict[str, str]) -> None:
        self.work = work
        self.shell = subprocess.Popen(
            ["bash", "--noprofile", "--norc"], stdin=subprocess.PIPE, stdout=(work / "shell.out").open("w"),
            stderr=subprocess.STDOUT, cwd=work, env=env, text=True, start_new_session=True,
        )
        self.send("set -e -o pipefail")

    def send(self, text: str) -> None:
        assert self.shell.stdin is not None
        self.shell.stdin.write(text + "\n")
        self.shell.stdin.flush()

    def run(self, number: int, block: Block) -> tuple[int | None, str]:
        """(exit status, output) of the block; status None: it ran past the timeout."""
        out, status = self.work / f"block-{number}.out", self.work / f"block-{number}.rc"
        if block.language == "python":
            script = self.work / f"block-{number}.py"
            script.write_text(block.code)
            command = f"python {script.name}"
        else:
            command = block.code
        # The block's stdin is /dev/null, so a command reading stdin cannot eat the session's next lines.
        self.send(f"{{\n{command}\n}} < /dev/null > {out.name} 2>&1\necho $? > {status.name}")
        deadline = time.monotonic() + BLOCK_TIMEOUT_S
        while not status.exists() and self.shell.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        output = out.read_text() if out.exists() else ""
        if status.exists():
            return int(status.read_text() or "0"), output
        return (self.shell.returncode if self.shell.returncode is not None else None), output

    def close(self) -> None:
        """SIGTERM to every process the blocks started (the broker stops its JVM), then SIGKILL."""
        for sig, wait_s in ((signal.SIGTERM, 60), (signal.SIGKILL, 10)):
            try:
                os.killpg(self.shell.pid, sig)
            except ProcessLookupError:
                return
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline:
                try:
                    os.killpg(self.shell.pid, 0)
                except ProcessLookupError:
                    return
                self.shell.poll()
                time.sleep(0.2)


def await_output(path: Path, expect: list[str], wait_s: float) -> str | None:
    """Wait until `path` holds every expected text in order; the first missing one if not within `wait_s`."""
    deadline = time.monotonic() + wait_s
    while True:
        missing = unexpected(path.read_text() if path.exists() else "", expect)
        if missing is None or time.monotonic() > deadline:
            return missing
        time.sleep(0.2)


def test_the_docs_examples_run_in_order_on_a_fresh_home(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / ".venv").symlink_to(ROOT / ".venv")
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMGAS_")}
    env.update({
        "EMGAS_HOME": str(tmp_path / "home"),
        "PATH": f"{ROOT / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        # The machine is shared: the first worker's web port is a free one (the second's is the doc's).
        "EMGAS_WEB_PORT": str(free_port()),
        # Only the teardown: workers stop at once instead of handing over to each other.
        "EMGAS_HAND_OVER_S": "0",
    })
    session = Session(work, env)
    ran, skipped = [], []
    try:
        number = 0
        for page in PAGES:
            for block in blocks(page):
                if block.skip:
                    skipped.append(f"{block.where}: {block.skip}")
                    continue
                number += 1
                started = time.monotonic()
                status, output = session.run(number, block)
                context = f"{block.where} (block {number}) exited {status}:\n{block.code}\n--- output ---\n{output[-4000:]}"
                assert status == 0, context
                # Only a block that starts something in the background may print after it exits.
                background = re.search(r"&\s*(#.*)?$", block.code, re.M) is not None
                missing = await_output(work / f"block-{number}.out", block.expect, BLOCK_TIMEOUT_S if background else 1)
                assert missing is None, f"{block.where}: {missing!r} not printed\n{context}"
                assert "Traceback" not in output, context
                ran.append(f"{block.where}: {time.monotonic() - started:.1f} s")
    finally:
        session.close()
    print(f"ran {len(ran)} blocks:\n" + "\n".join(ran) + f"\nskipped {len(skipped)}:\n" + "\n".join(skipped))
    assert len(ran) >= 8
