"""eAPI (JSON-RPC 2.0 `runCmds` over HTTP/1.1) for every twin switch: HTTPS with the twin's self-signed certificate
(EOS's default) and plain HTTP (`protocol http`), a listening socket each per switch. `HEAD /command-api` answers 200
(clients such as ANTA's asynceapi check the endpoint with it). Besides HTTP Basic on every request, EOS's cookie
sessions: `POST /login` with `{"username", "password"}` sets a `Session` cookie that authorises later requests
until `POST /logout` (asynceapi's `use_session_auth`).

Answers have EOS's shapes, which is what pyeapi (and so napalm's `eos` driver) parses: `result` is one entry per
command (`{"output": text}` in text format); a failing command stops the request with error 1002, `message`
"CLI command N of M 'x' failed: invalid command" and `data` holding the results so far plus `{"errors": [...]}`.
Each request runs in a fresh privileged CLI session, as on EOS.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import secrets
import ssl
import time
from dataclasses import dataclass, field
from typing import Any

from .endpoints import Credentials, DeviceEndpoints
from .eos_cli import CliError, CliSession
from .eos_config import ConfigStore
from .model import Twin

MAX_BODY = 16 * 1024 * 1024
MAX_SESSIONS = 256  # per switch; the oldest is dropped beyond it (a client that never logs out cannot grow it)
_PARAMS = {"version", "cmds", "format", "autoComplete", "expandAliases", "timestamps", "includeErrorDetail"}
_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed"}


def _cookie(header: str) -> str | None:
    """The `Session` cookie of a Cookie header."""
    for part in header.split(";"):
        name, _, value = part.strip().partition("=")
        if name == "Session" and value:
            return value
    return None


SHOW_LOGGING_S = 0.05  # ASSUMPTION: tens of ms to read the log; no figure in the reference
SHOW_LOGGING_MAX_S = 3.0


class _HttpError(Exception):
    def __init__(self, status: int, body: str = ""):
        super().__init__(status)
        self.status = status
        self.body = body


@dataclass
class EapiServers:
    servers: dict[str, asyncio.Server]  # plain HTTP
    https: dict[str, asyncio.Server] = field(default_factory=dict)

    def port(self, device: str) -> int:
        port: int = self.servers[device].sockets[0].getsockname()[1]
        return port

    def https_port(self, device: str) -> int:
        port: int = self.https[device].sockets[0].getsockname()[1]
        return port

    async def close(self) -> None:
        every = [*self.servers.values(), *self.https.values()]
        for server in every:
            server.close()
        for server in every:
            await server.wait_closed()


async def start_eapi_servers(
    twin: Twin,
    configs: ConfigStore,
    endpoints: dict[str, DeviceEndpoints],
    credentials: Credentials,
    tls: ssl.SSLContext | None = None,
) -> EapiServers:
    """Plain HTTP on each switch's eapi_port; with `tls`, HTTPS on its eapi_https_port too."""
    out = EapiServers({})
    try:
        for device, ep in endpoints.items():
            if device not in configs.devices:
                continue  # not an EOS switch: no eAPI
            handler = _Handler(twin, configs, device, credentials)
            out.servers[device] = await _listen(handler, device, ep.host, ep.eapi_port, None)
            if tls is not None:
                out.https[device] = await _listen(handler, device, ep.host, ep.eapi_https_port, tls)
    except BaseException:
        await out.close()
        raise
    return out


async def _listen(handler: _Handler, device: str, host: str, port: int, tls: ssl.SSLContext | None) -> asyncio.Server:
    try:
        return await asyncio.start_server(handler.serve, host, port, ssl=tls)
    except OSError as e:
        what = "eAPI over HTTPS" if tls else "eAPI"
        raise OSError(e.errno, f"{what} for {device}: cannot listen on {host}:{port}: {e.strerror}") from e


class _Handler:
    def __init__(self, twin: Twin, configs: ConfigStore, device: str, credentials: Credentials):
        self.twin = twin
        self.configs = configs
        self.device = device
        self.credentials = credentials
        self.sessions: dict[str, str] = {}  # cookie -> user, oldest first
        self.last_request = 0.0  # monotonic time the latest request arrived

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await self._one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Serve one request; False when the connection should close."""
        head = await reader.readuntil(b"\r\n\r\n") if not reader.at_eof() else b""
        if not head:
            return False
        lines = head.decode("latin-1").split("\r\n")
        try:
            method, path, version = lines[0].split(" ", 2)
        except ValueError:
            await _send(writer, 400, "text/plain", b"bad request line", keep=False)
            return False
        headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
        length = int(headers.get("content-length", "0") or 0)
        if length > MAX_BODY:
            await _send(writer, 400, "text/plain", b"request too large", keep=False)
            return False
        body = await reader.readexactly(length) if length else b""
        keep = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
        route = path.split("?")[0]
        try:
            if route in ("/login", "/logout") and method == "POST":
                await self._session(route, body, headers, writer, keep)
                return keep
            self._authorise(headers.get("authorization", ""), _cookie(headers.get("cookie", "")))
            if route != "/command-api":
                raise _HttpError(404, "Not Found")
            if method == "HEAD":
                await _send(writer, 200, "application/json", b"", keep)
                return keep
            if method != "POST":
                raise _HttpError(405, "Only POST is supported")
            arrived = time.monotonic()
            self.last_request = arrived
            if b"show logging" in body:
                await self._settle(arrived)
            answer = self.rpc(body)
        except _HttpError as e:
            extra = {"WWW-Authenticate": 'Basic realm="COMMAND-API"'} if e.status == 401 else {}
            await _send(writer, e.status, "text/plain", e.body.encode(), keep, extra)
            return keep
        await _send(writer, 200, "application/json", json.dumps(answer).encode(), keep)
        return keep

    async def _settle(self, arrived: float) -> None:
        """`show logging` answers once the requests sent with it have been served: EOS reads the log file for it,
        which takes a while, during which the commands sent at the same moment (ANTA sends a test's `send log` and
        its `show logging` concurrently, among a hundred others) go first. Waits until no request arrived for
        SHOW_LOGGING_S, at most SHOW_LOGGING_MAX_S."""
        while time.monotonic() - arrived < SHOW_LOGGING_MAX_S:
            await asyncio.sleep(SHOW_LOGGING_S)
            if time.monotonic() - max(self.last_request, arrived) >= SHOW_LOGGING_S:
                return

    async def _session(
        self, route: str, body: bytes, headers: dict[str, str], writer: asyncio.StreamWriter, keep: bool
    ) -> None:
        if route == "/logout":
            self.sessions.pop(_cookie(headers.get("cookie", "")) or "", None)
            await _send(writer, 200, "application/json", b"{}", keep)
            return
        try:
            creds = json.loads(body)
            user, password = str(creds["username"]), str(creds["password"])
        except (ValueError, KeyError, TypeError):
            await _send(writer, 400, "text/plain", b'expected {"username": ..., "password": ...}', keep)
            return
        if not self.credentials.check(user, password):
            await _send(writer, 401, "text/plain", b"Authentication failed: Bad username/password combination", keep)
            return
        token = secrets.token_hex(16)
        self.sessions[token] = user
        while len(self.sessions) > MAX_SESSIONS:
            self.sessions.pop(next(iter(self.sessions)))
        cookie = {"Set-Cookie": f"Session={token}; Path=/; Secure; HttpOnly"}
        await _send(writer, 200, "application/json", b"{}", keep, cookie)

    def _authorise(self, value: str, session: str | None = None) -> None:
        if session is not None and session in self.sessions:
            return
        scheme, _, encoded = value.partition(" ")
        try:
            user, _, password = base64.b64decode(encoded, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            user, password = "", ""
        if scheme.lower() != "basic" or not self.credentials.check(user, password):
            raise _HttpError(401, "Unable to authenticate user: Bad username/password combination")

    # --- JSON-RPC --------------------------------------------------------------------------------
    def rpc(self, body: bytes) -> dict[str, Any]:
        try:
            req = json.loads(body)
        except (ValueError, UnicodeDecodeError) as e:
            return _rpc_error(None, -32700, f"Parse error: {e}")
        if not isinstance(req, dict):
            return _rpc_error(None, -32600, "Invalid Request: expected a JSON object")
        rid = req.get("id")
        if req.get("jsonrpc") != "2.0":
            return _rpc_error(rid, -32600, "Invalid Request: jsonrpc must be '2.0'")
        if req.get("method") != "runCmds":
            return _rpc_error(rid, -32601, f"Method not found: {req.get('method')!r}")
        params = req.get("params")
        problem = _check_params(params)
        if problem:
            return _rpc_error(rid, -32602, problem)
        assert isinstance(params, dict)
        return self.run_cmds(rid, params["cmds"], params.get("format", "json") or "json", params)

    def run_cmds(self, rid: Any, cmds: list[Any], fmt: str, params: dict[str, Any]) -> dict[str, Any]:
        self.twin.advance()  # commit timers due by now fire before the commands run
        cli = CliSession(
            self.twin, self.configs, self.device, privileged=True, autocomplete=bool(params.get("autoComplete"))
        )
        results: list[dict[str, Any]] = []
        for n, item in enumerate(cmds, 1):
            cmd = item if isinstance(item, str) else str(item["cmd"])
            try:
                if fmt == "text":
                    results.append({"output": cli.run(cmd)})
                else:
                    results.append(cli.run_json(cmd))
            except CliError as e:
                code = 1003 if e.reason == "unconverted command" else 1002
                message = f"CLI command {n} of {len(cmds)} {cmd!r} failed: {e.reason}"
                data = [*results, {"errors": [e.message.removeprefix("% ")]}]
                return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message, "data": data}}
        return {"jsonrpc": "2.0", "id": rid, "result": results}


def _check_params(params: Any) -> str | None:
    if not isinstance(params, dict):
        return "Invalid params: 'params' must be an object"
    unknown = sorted(set(params) - _PARAMS)
    if unknown:
        return f"runCmds() got an unexpected keyword argument '{unknown[0]}'"
    version = params.get("version", 1)
    if version != "latest" and not (isinstance(version, int) and version >= 1):
        return "Invalid params: 'version' must be a positive integer or 'latest'"
    if params.get("format", "json") not in ("json", "text", None):
        return "Invalid params: 'format' must be 'json' or 'text'"
    cmds = params.get("cmds")
    if not isinstance(cmds, list) or not cmds:
        return "Invalid params: 'cmds' must be a non-empty list"
    for c in cmds:
        ok = isinstance(c, str) or (isinstance(c, dict) and isinstance(c.get("cmd"), str))
        if not ok:
            return "Invalid params: each command is a string or an object with 'cmd' (and optional 'input')"
    return None


def _rpc_error(rid: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}


async def _send(
    writer: asyncio.StreamWriter,
    status: int,
    ctype: str,
    body: bytes,
    keep: bool,
    extra: dict[str, str] | None = None,
) -> None:
    headers = {
        "Content-Type": ctype,
        "Content-Length": str(len(body)),
        "Connection": "keep-alive" if keep else "close",
        **(extra or {}),
    }
    head = f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    writer.write(head.encode("latin-1") + body)
    await writer.drain()
