"""The key-encryption key: where a process finds it, and the embedded default's file.

It wraps every data key of the key topic (`processors.sealing`), so every
worker, replay and forget of one cluster needs the same one: set
`EMGAS_KEY_ENCRYPTION_KEY` (base64 of 32 bytes) or
`EMGAS_KEY_ENCRYPTION_KEY_FILE` (a file holding it) on each. Without
either, a process uses `<EMGAS_HOME>/key-encryption-key`, which the first
worker that seals makes (32 random bytes, readable by its owner only):
enough for one machine, and the default `make demo` runs.
"""

from __future__ import annotations

import base64
import binascii
import os
from pathlib import Path

from pydantic import SecretStr

from emgas.processors.sealing import KEY_BYTES, KeyEncryptionKey
from emgas.streams.errors import ConfigError

DEFAULT_FILE = "key-encryption-key"


def load_kek(secret: SecretStr | None, path: Path | None, home: Path, create: bool) -> KeyEncryptionKey | None:
    """The configured key (`secret`, else the file at `path`, else the
    default file in `home`); the default file is made when `create` and
    absent; None when there is none. ConfigError when one is unusable."""
    if secret is not None and path is not None:
        raise ConfigError("set EMGAS_KEY_ENCRYPTION_KEY or EMGAS_KEY_ENCRYPTION_KEY_FILE, not both")
    if secret is not None:
        return _decoded(secret.get_secret_value(), "EMGAS_KEY_ENCRYPTION_KEY")
    where = path or home / DEFAULT_FILE
    if path is None and create and not where.exists():
        _make(where)
    try:
        text = where.read_text()
    except FileNotFoundError:
        if path is not None:
            raise ConfigError(f"EMGAS_KEY_ENCRYPTION_KEY_FILE {path} does not exist") from None
        return None
    except OSError as exc:
        raise ConfigError(f"cannot read the key-encryption key file {where}: {exc.strerror}") from None
    return _decoded(text, str(where))


def _decoded(text: str, source: str) -> KeyEncryptionKey:
    try:
        secret = base64.b64decode(text.strip(), validate=True)
    except binascii.Error:
        secret = b""
    if len(secret) != KEY_BYTES:
        raise ConfigError(f"{source}: a key-encryption key is base64 of {KEY_BYTES} bytes "
                          "(make one with: head -c 32 /dev/urandom | base64)")
    return KeyEncryptionKey(secret)


def _make(where: Path) -> None:
    """32 random bytes, base64, in a file only its owner reads. Written
    whole beside it, then linked into place (which fails if the file is
    there): two workers starting at once on one home each read a whole
    key, the same one, never a file half written."""
    where.parent.mkdir(parents=True, exist_ok=True)
    draft = where.with_name(f".{where.name}.{os.getpid()}.{os.urandom(4).hex()}")
    fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(base64.b64encode(os.urandom(KEY_BYTES)).decode() + "\n")
    try:
        os.link(draft, where)
    except FileExistsError:
        pass  # another process made it first: its key is the one
    finally:
        draft.unlink()
