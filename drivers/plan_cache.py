"""Offline plans with reuse: within a run (switches that share a config) and across runs (an on-disk cache).

A plan is a pure function of fabricd's version, the platform and the two texts it compares, so it is kept
in SQLite under sha256 of exactly those: a re-plan after one switch's intent changed recomputes that switch
alone. EOS gets the most: pyavd renders once per signature (all but the hostname; drivers/eos/render.py),
the rendered templates are cached on disk too (a warm run never imports pyavd), and only the owned parts of
the configs enter the key, so drift outside fabricd's scope does not miss.

The cache is an optimisation and never a failure: a corrupt or unreadable file is replaced (one warning),
and if that fails too the run goes on without it.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import sqlite3
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from drivers.base import DevicePlan, Driver
from drivers.eos import plan as eos_plan
from drivers.eos import render as eos_render
from policies.intent import DeviceIntent

# Bump when what is stored changes meaning; old rows then simply miss.
_SCHEMA = "2"  # 2: EOS owns the DLB line (ip hardware fib load-balance distribution dynamic)
CACHE_FILE = "plan-cache.sqlite3"
_TABLES = ("plans", "renders", "owned")
MAX_ROWS = 200_000  # per table; a 16k-GPU fabric adds at most one row per switch and table per run
Warn = Callable[[str], None]


def default_cache_dir() -> Path:
    """$XDG_CACHE_HOME/fabricd, else ~/.cache/fabricd."""
    base = os.environ.get("XDG_CACHE_HOME")
    return (Path(base) if base else Path.home() / ".cache") / "fabricd"


def _dist_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "?"


def _key(*parts: str) -> str:
    """sha256 over length-prefixed parts, so no two different part lists share a key."""
    h = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8", "surrogatepass")
        h.update(b"%d:" % len(data))
        h.update(data)
    return h.hexdigest()


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@contextmanager
def paused_gc() -> Iterator[None]:
    """No cyclic GC while building many small acyclic objects: at 16k GPUs the collector alone doubled the
    run time, rescanning the growing heap. Reference counting still frees everything."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class PlanCache:
    """key -> value rows in SQLite: `plans` (diff hunks + commands), `renders` (rendered templates), `owned`
    (sha256 of the owned part of a running config, so an unchanged file is not scanned again).

    Reads go straight to the file; writes wait in memory until `flush` (one transaction per run).
    `PlanCache(None)` is a cache that never hits and stores nothing (`--no-cache`).
    """

    def __init__(self, directory: Path | None, warn: Warn | None = None, timeout_s: float = 10.0):
        self.path = directory / CACHE_FILE if directory is not None else None
        self._warn: Warn = warn or (lambda m: warnings.warn(m, RuntimeWarning, stacklevel=2))
        self._warned = False
        self._pending: dict[str, list[tuple[str, str]]] = {t: [] for t in _TABLES}
        self._db: sqlite3.Connection | None = None
        self.hits = 0
        self.misses = 0
        self._timeout_s = timeout_s  # how long to wait for another run's write lock
        if self.path is not None:
            self._open()

    # ---- connection ------------------------------------------------------------------------------
    def _open(self) -> None:
        assert self.path is not None
        try:
            self._db = self._connect(self.path, self._timeout_s)
        except (sqlite3.DatabaseError, OSError) as exc:
            self._broken(exc)

    @staticmethod
    def _connect(path: Path, timeout_s: float) -> sqlite3.Connection:
        path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(path, timeout=timeout_s)
        try:
            db.execute("CREATE TABLE IF NOT EXISTS plans (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            db.execute("CREATE TABLE IF NOT EXISTS renders (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            db.execute("CREATE TABLE IF NOT EXISTS owned (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            db.execute("SELECT count(*) FROM plans").fetchone()  # a file that is not a database fails here
            db.commit()
        except sqlite3.DatabaseError:
            db.close()
            raise
        return db

    def _broken(self, exc: Exception) -> None:
        """Replace a damaged cache file once; if that fails, or the file is busy or read-only (another run
        holds it: never delete it then), go on without a cache."""
        if self._db is not None:
            self._db.close()
            self._db = None
        if self._warned or self.path is None:
            return
        self._warned = True
        if isinstance(exc, sqlite3.OperationalError):  # locked, read-only, cannot open: not damage
            self._warn(f"plan cache {self.path} is unusable ({exc}); planning without it")
            return
        try:
            self.path.unlink(missing_ok=True)
            self._db = self._connect(self.path, self._timeout_s)
            self._warn(f"plan cache {self.path} was unusable ({exc}); rebuilt it empty")
        except (sqlite3.DatabaseError, OSError) as again:
            self._db = None
            self._warn(f"plan cache {self.path} is unusable ({again}); planning without it")

    # ---- rows ------------------------------------------------------------------------------------
    def _get(self, table: str, key: str) -> str | None:
        if self._db is None:
            return None
        try:
            row = self._db.execute(f"SELECT value FROM {table} WHERE key = ?", (key,)).fetchone()
        except sqlite3.DatabaseError as exc:
            self._broken(exc)
            return None
        return str(row[0]) if row is not None else None

    def _put(self, table: str, key: str, value: str) -> None:
        if self.path is not None:
            self._pending[table].append((key, value))

    def flush(self) -> None:
        """Write what this run computed, in one transaction."""
        if self._db is None or not any(self._pending.values()):
            return
        try:
            with self._db:
                for table, rows in self._pending.items():
                    self._db.executemany(f"INSERT OR REPLACE INTO {table} (key, value) VALUES (?, ?)", rows)
                    if rows:  # bounded: the oldest rows go (a row pruned while still in use is recomputed once)
                        self._db.execute(
                            f"DELETE FROM {table} WHERE rowid <= (SELECT max(rowid) FROM {table}) - ?", (MAX_ROWS,)
                        )
        except sqlite3.DatabaseError as exc:
            self._broken(exc)
        finally:
            self._pending = {t: [] for t in _TABLES}

    def close(self) -> None:
        self.flush()
        if self._db is not None:
            self._db.close()
            self._db = None

    # ---- typed access ----------------------------------------------------------------------------
    def plan(self, key: str) -> tuple[str, list[str]] | None:
        raw = self._get("plans", key)
        if raw is None:
            self.misses += 1
            return None
        try:
            hunks, commands = json.loads(raw)
        except ValueError:
            self.misses += 1
            return None
        self.hits += 1
        return str(hunks), [str(c) for c in commands]

    def put_plan(self, key: str, hunks: str, commands: list[str]) -> None:
        self._put("plans", key, json.dumps([hunks, commands]))

    def owned(self, key: str) -> str | None:
        return self._get("owned", key)

    def put_owned(self, key: str, digest: str) -> None:
        self._put("owned", key, digest)

    def template(self, key: str) -> tuple[bool, tuple[str, str] | None]:
        """(found, template); a found None is a signature that cannot be templated."""
        raw = self._get("renders", key)
        if raw is None:
            return False, None
        try:
            value = json.loads(raw)
        except ValueError:
            return False, None
        return True, (str(value[0]), str(value[1])) if value is not None else None

    def put_template(self, key: str, template: tuple[str, str] | None) -> None:
        self._put("renders", key, json.dumps(list(template) if template is not None else None))


class OfflinePlanner:
    """Plans switches from their saved running configs, reusing renders and plans (`PlanCache`)."""

    def __init__(self, cache: PlanCache):
        self.cache = cache
        self._versions = (_dist_version("fabricd"), _dist_version("pyavd"), _dist_version("hier-config"))
        self._templates: dict[str, tuple[str, str] | None] = {}
        self._owned_intended: dict[str, tuple[str, str]] = {}
        self._ports_ids: dict[str, str] = {}

    def plan(self, driver: Driver, dev: DeviceIntent, running: str) -> DevicePlan:
        """What `driver.plan(dev.device, running, driver.render(dev), ports)` returns, reused where it can be.

        Raises what the driver's plan raises (an EOS running config hier-config cannot parse)."""
        if driver.platform == "eos":
            return self._plan_eos(dev, running)
        ports = {p.port for p in dev.ports}
        intended = driver.render(dev)
        key = _key(_SCHEMA, *self._versions, driver.platform, dev.device, running, intended, *sorted(ports))
        hit = self.cache.plan(key)
        if hit is not None:
            return DevicePlan(dev.device, hit[0], hit[1])
        result = driver.plan(dev.device, running, intended, ports)
        if result.error is None:
            self.cache.put_plan(key, result.diff, result.commands)
        return result

    def _plan_eos(self, dev: DeviceIntent, running: str) -> DevicePlan:
        sig = eos_render.signature(dev)
        want, want_id = self._want(dev, sig)
        # The owned part of an unchanged running config is known by its digest: no scan, no parse.
        owned_key = _key(_SCHEMA, *self._versions, "eos-owned", _digest(running), self._ports_id(dev, sig))
        have_id = self.cache.owned(owned_key)
        have = None
        if have_id is None:
            have = eos_plan.owned_config(running, {p.port for p in dev.ports})  # may raise: nothing cached
            have_id = _digest(have)
            self.cache.put_owned(owned_key, have_id)
        plan_key = _key(_SCHEMA, *self._versions, "eos", have_id, want_id)
        hit = self.cache.plan(plan_key)
        if hit is not None:
            return eos_plan.device_plan(dev.device, *hit)
        if have is None:
            have = eos_plan.owned_config(running, {p.port for p in dev.ports})
        hunks, commands = eos_plan.plan_owned(have, want)
        self.cache.put_plan(plan_key, hunks, list(commands))
        return eos_plan.device_plan(dev.device, hunks, commands)

    def _ports_id(self, dev: DeviceIntent, sig: str) -> str:
        """Digest of the switch's port names (all the owned part of its running config depends on besides
        the text); once per signature, which contains them."""
        found = self._ports_ids.get(sig)
        if found is None:
            found = self._ports_ids[sig] = _digest("\n".join(sorted(p.port for p in dev.ports)))
        return found

    def _want(self, dev: DeviceIntent, sig: str) -> tuple[str, str]:
        """The owned part of the intended config, and its digest; once per signature."""
        found = self._owned_intended.get(sig)
        if found is not None:
            return found
        template = self._template(sig)
        # The hostname is outside the owned part, so a signature's template stands for all its switches.
        intended = eos_render.render(dev) if template is None else template[0] + dev.device + template[1]
        want = eos_plan.owned_config(intended, {p.port for p in dev.ports})
        result = (want, _digest(want))
        if template is not None:
            self._owned_intended[sig] = result
        return result

    def _template(self, sig: str) -> tuple[str, str] | None:
        if sig in self._templates:
            return self._templates[sig]
        key = _key(_SCHEMA, *self._versions, "eos-render", sig)
        found, template = self.cache.template(key)
        if not found:
            template = eos_render.render_template(sig)
            self.cache.put_template(key, template)
        self._templates[sig] = template
        return template
