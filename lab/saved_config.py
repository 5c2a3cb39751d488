"""Where the twin keeps what its switches saved (EOS `write memory`, SONiC `config save`) across restarts of the
twin process: a restart is a power cycle of every switch, and a real switch boots from its saved config, not from
the one it was first given. `fabricd lab up` starts a lab afresh (it empties the folder)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

SAVED_DIR = "saved"  # under the twin's state dir


def write_private(path: Path, text: str) -> None:
    """Write `text` to `path` whole or not at all (a twin killed mid-write boots from the previous save), readable by
    its owner only (a saved EOS config holds the users' password hashes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
