"""The login shell of a twin SONiC switch: a small bash for what an automation client sends over SSH.

SONiC logs an SSH user into bash (`admin@leaf1:~$`), so netmiko drives it as `linux`. This shell understands
lists (`;`, `&&`, `||`), background jobs (`&`, `$!`, `kill PID`), exit status (`$?`), redirections (`>`, `>>`,
`2>`, `2>&1`, `<`), quoting, quoted heredocs (`cat > FILE <<'EOF'`), `nohup`, `sh -c`, `sleep` inside a
background job (on the twin's clock, so a `sleep N; sudo config rollback X` job really fires), `sudo`,
`mkdir`/`rmdir`/`rm`/`cat`/`echo`, `flock FILE COMMAND`, and the SONiC commands of `sonic_commands`. Anything else is
`-bash: X: command not found` (127), never silently accepted.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from topology.units import NS

from .model import Twin
from .sonic_commands import Output, config_command, lldpctl_command, show_command, vtysh_command
from .sonic_config import SonicDevice

log = logging.getLogger(__name__)
HOME = "/home/admin"
LAST_STATUS, LAST_JOB = "\x00?\x00", "\x00!\x00"  # expanded when the command runs, not when it is read
_OPERATORS = ("2>&1", "&&", "||", ">>", "<<", ";", "&", "|", ">", "<")


class ShellSyntaxError(Exception):
    pass


@dataclass
class Command:
    argv: list[str]
    stdout: str | None = None  # a file, or None: the terminal
    append: bool = False
    stderr: str | None = None  # "/dev/null", "&1" or None
    heredoc: str | None = None  # the delimiter; the body becomes stdin
    background: list[Step] | None = None  # `LIST &`: run as a job


Step = tuple[str, Command]  # (";" | "&&" | "||", command): run always, on success, on failure


# --- reading a line ------------------------------------------------------------------------------------------


def lex(line: str) -> list[tuple[str, bool]]:
    """Words (quotes removed, `$?`/`$!` marked) and operators, as (text, is_operator)."""
    out: list[tuple[str, bool]] = []
    word: list[str] = []
    in_word = False
    i, n = 0, len(line)

    def flush() -> None:
        nonlocal in_word
        if in_word:
            out.append(("".join(word), False))
            word.clear()
            in_word = False

    while i < n:
        c = line[i]
        if c in " \t":
            flush()
            i += 1
        elif c == "#" and not in_word:
            break
        elif c == "'":
            end = line.find("'", i + 1)
            if end < 0:
                raise ShellSyntaxError("unexpected EOF while looking for matching `''")
            word.append(line[i + 1 : end])
            in_word, i = True, end + 1
        elif c == '"':
            i += 1
            while i < n and line[i] != '"':
                if line[i] == "\\" and i + 1 < n and line[i + 1] in '"\\$':
                    word.append(line[i + 1])
                    i += 2
                elif line.startswith(("$?", "$!"), i):
                    word.append(LAST_STATUS if line[i + 1] == "?" else LAST_JOB)
                    i += 2
                else:
                    word.append(line[i])
                    i += 1
            if i >= n:
                raise ShellSyntaxError("unexpected EOF while looking for matching `\"'")
            in_word, i = True, i + 1
        elif c == "\\" and i + 1 < n:
            word.append(line[i + 1])
            in_word, i = True, i + 2
        elif line.startswith(("$?", "$!"), i):
            word.append(LAST_STATUS if line[i + 1] == "?" else LAST_JOB)
            in_word, i = True, i + 2
        else:
            # `2>` is a redirection only at the start of a word (`sleep 2 >x` keeps its 2).
            op = next((o for o in _OPERATORS if line.startswith(o, i) and (not o.startswith("2") or not in_word)), None)
            if op is None and not in_word and line.startswith("2>", i):
                op = "2>"
            if op is None:
                word.append(c)
                in_word, i = True, i + 1
            else:
                flush()
                out.append((op, True))
                i += len(op)
    flush()
    return out


def _command(tokens: list[tuple[str, bool]]) -> Command:
    cmd = Command([])
    it = iter(tokens)
    for text, is_op in it:
        if not is_op:
            cmd.argv.append(text)
            continue
        if text == "2>&1":
            cmd.stderr = "&1"
            continue
        target = next(it, None)
        if target is None or target[1]:
            raise ShellSyntaxError("syntax error near unexpected token `newline'")
        if text in (">", ">>"):
            cmd.stdout, cmd.append = target[0], text == ">>"
        elif text == "2>":
            cmd.stderr = target[0]
        elif text == "<<":
            cmd.heredoc = target[0]
        elif text != "<":  # `< FILE`: nothing here reads stdin but cat of a heredoc
            raise ShellSyntaxError(f"syntax error near unexpected token `{text}'")
    if not cmd.argv:
        raise ShellSyntaxError("syntax error: a redirection without a command")
    return cmd


def parse(line: str) -> list[Step]:
    """A line as steps; a list ended by `&` becomes one background step."""
    steps: list[Step] = []
    current: list[Step] = []
    words: list[tuple[str, bool]] = []
    connector = ";"
    tokens = lex(line)
    for i, (text, is_op) in enumerate([*tokens, (";", True)]):
        if not is_op or text in (">", ">>", "<", "<<", "2>", "2>&1"):
            words.append((text, is_op))
            continue
        if text == "|":
            raise ShellSyntaxError("pipes are not modelled by the twin's shell")
        if not words:
            if i == len(tokens) and not current and connector == ";":
                break  # an empty line, or one that ends in `;` or `&`
            raise ShellSyntaxError(f"syntax error near unexpected token `{text}'")
        current.append((connector, _command(words)))
        words = []
        if text in ("&&", "||"):
            connector = text
            continue
        if text == "&":
            steps.append((";", Command(["<job>"], background=current)))
        else:
            steps.extend(current)
        current, connector = [], ";"
    return steps


# --- the machine behind the shells of one switch ------------------------------------------------------------


@dataclass
class SonicHost:
    """What all SSH logins to one switch share: its files (/tmp is tmpfs), directories and background jobs."""

    twin: Twin
    dev: SonicDevice
    files: dict[str, str] = field(default_factory=dict)
    dirs: set[str] = field(default_factory=lambda: {"/", "/tmp", "/home", HOME, "/etc", "/etc/sonic"})
    jobs: set[int] = field(default_factory=set)
    pids: itertools.count[int] = field(default_factory=lambda: itertools.count(4242))

    def __post_init__(self) -> None:
        self.dev.on_reboot.append(self._rebooted)

    def _rebooted(self) -> None:
        self.jobs.clear()
        self.files = {p: t for p, t in self.files.items() if not p.startswith("/tmp/")}
        self.dirs = {d for d in self.dirs if not d.startswith("/tmp/")}

    def path(self, name: str) -> str:
        return name if name.startswith("/") else f"{HOME}/{name}"


class SonicShell:
    """One login: its prompt, `$?`, `$!` and a heredoc being read."""

    def __init__(self, host: SonicHost, user: str = "admin"):
        self.host = host
        self.dev = host.dev
        self.user = user
        self.status = 0
        self.last_job = 0
        self._heredoc: tuple[list[Step], str, list[str]] | None = None

    def greeting(self) -> str:
        return "You are on SONiC (fabricd twin)\n-- Software for Open Networking in the Cloud --\n\n"

    def prompt(self) -> str:
        return "> " if self._heredoc is not None else f"{self.user}@{self.dev.hostname}:~$ "

    def execute(self, line: str) -> tuple[str, int, bool]:
        """Run one typed line: (output, exit status, whether the user logged out)."""
        self.dev.check_reboot()
        line = line.rstrip("\r\n")
        if self._heredoc is not None:
            steps, end, body = self._heredoc
            if line != end:
                body.append(line + "\n")
                return "", self.status, False
            self._heredoc = None
            return self._finish(steps, "".join(body))
        if line.strip() in ("exit", "logout"):
            return "", self.status, True
        try:
            steps = parse(line)
        except ShellSyntaxError as e:
            self.status = 2
            return f"-bash: {e}\n", 2, False
        ends = [c.heredoc for _, c in steps if c.heredoc is not None]
        if ends:
            self._heredoc = (steps, ends[0], [])
            return "", self.status, False
        return self._finish(steps, "")

    def _finish(self, steps: list[Step], stdin: str) -> tuple[str, int, bool]:
        try:
            out, status = self.run(steps, stdin, background=None, status=self.status)
        except Exception:  # a bug behind one command must not drop the login (log.exception keeps it visible)
            log.exception("SONiC shell line failed on %s", self.dev.device)
            out, status = "-bash: internal error in the twin\n", 1
        self.status = 0 if status is None else status
        return out, self.status, False

    # -- running steps --
    def run(self, steps: list[Step], stdin: str, background: int | None, status: int = 0) -> tuple[str, int | None]:
        """Run steps in order; in a background job a `sleep N` suspends the rest on the twin's clock (the
        status is then None: the job goes on later)."""
        out: list[str] = []
        queue = list(steps)
        while queue:
            connector, cmd = queue.pop(0)
            if (connector == "&&" and status != 0) or (connector == "||" and status == 0):
                continue
            if cmd.background is not None:
                self.last_job = self.spawn(cmd.background)
                status = 0
                continue
            argv = [self._expand(a, status) for a in cmd.argv]
            while argv and argv[0] in ("nohup", "exec"):
                argv = argv[1:]
            if argv[:2] == ["sh", "-c"] and background is not None and len(argv) > 2:
                try:  # the script joins this job's queue, so a `sleep` in it suspends the whole job
                    inner = parse(argv[2])
                except ShellSyntaxError:
                    status = 2
                    continue
                queue = [(";" if i == 0 else k, c) for i, (k, c) in enumerate(inner)] + queue
                continue
            if argv[:1] == ["sleep"] and background is not None:
                seconds = float(argv[1]) if len(argv) > 1 and argv[1].replace(".", "", 1).isdigit() else 0.0
                self.host.twin.schedule(self.host.twin.clock() + int(seconds * NS), self._resume(background, queue))
                return "".join(out), None
            text, err, status = self._exec(argv, cmd, stdin)
            out.append(self._redirect(cmd, text, err))
        return "".join(out), status

    def _resume(self, pid: int, rest: list[Step]) -> Callable[[int], None]:
        def go(_at: int) -> None:
            self.dev.check_reboot()
            if pid not in self.host.jobs:
                return  # killed, or gone with a reboot
            try:
                done = self.run(rest, "", background=pid)[1] is not None
            except Exception:  # a timer runs inside Twin.advance: a bug here must not stop the twin
                log.exception("background job %d on %s failed", pid, self.dev.device)
                done = True
            if done:
                self.host.jobs.discard(pid)

        return go

    def spawn(self, steps: list[Step]) -> int:
        pid = next(self.host.pids)
        self.host.jobs.add(pid)
        job = SonicShell(self.host, self.user)  # a job has its own $? and $!
        if job.run(steps, "", background=pid)[1] is not None:
            self.host.jobs.discard(pid)  # it ran to the end at once
        return pid

    def _expand(self, word: str, status: int) -> str:
        return word.replace(LAST_STATUS, str(status)).replace(LAST_JOB, str(self.last_job))

    def _redirect(self, cmd: Command, text: str, err: str) -> str:
        if cmd.stderr == "&1":
            text, err = text + err, ""
        elif cmd.stderr is not None:
            if cmd.stderr != "/dev/null":
                self.host.files[self.host.path(cmd.stderr)] = err
            err = ""
        if cmd.stdout is not None:
            if cmd.stdout != "/dev/null":
                path = self.host.path(cmd.stdout)
                self.host.files[path] = (self.host.files.get(path, "") if cmd.append else "") + text
            text = ""
        return text + err

    def _exec(self, argv: list[str], cmd: Command, stdin: str, root: bool = False) -> Output:
        name, args = argv[0], argv[1:]
        if name == "sudo":
            while args and args[0].startswith("-"):  # -n and friends: the twin's admin has passwordless sudo
                args = args[2:] if args[0] in ("-u", "-g", "-C") else args[1:]
            return self._exec(args, cmd, stdin, root=True) if args else ("", "usage: sudo command\n", 1)
        builtin = _BUILTINS.get(name)
        if builtin is not None:
            return builtin(self, args, stdin if cmd.heredoc else "")
        if name in ("TSA", "TSB", "TSC"):
            return self._traffic_shift(name, root)
        if name == "show":
            return show_command(self.host.twin, self.dev, args)
        if name == "vtysh":
            return vtysh_command(self.host.twin, self.dev, args)
        if name in ("lldpctl", "lldpcli"):
            return lldpctl_command(self.host.twin, self.dev, args)
        if name == "config":
            if not root:
                return "", "Root privileges are required for this operation\n", 1
            return config_command(self.dev, args, self._read)
        if name == "flock":
            # util-linux flock(1) [-o] FILE COMMAND...: COMMAND under an exclusive lock on FILE. The twin runs each
            # line whole before the next (one event loop), so the lock holds by construction.
            while args and args[0].startswith("-"):
                args = args[2:] if args[0] in ("-w", "--timeout", "-E", "--conflict-exit-code") else args[1:]
            if len(args) < 2:
                return "", "flock: bad usage\nTry 'flock --help' for more information.\n", 64
            return self._exec(args[1:], cmd, stdin, root)
        if name == "sh" and args[:1] == ["-c"] and len(args) > 1:
            try:
                inner = parse(args[1])
            except ShellSyntaxError as e:
                return "", f"sh: 1: {e}\n", 2
            out, status = self.run(inner, "", background=None)
            return out, "", status or 0
        return "", f"-bash: {name}: command not found\n", 127

    def _traffic_shift(self, name: str, root: bool) -> Output:
        """SONiC's traffic shift (reference/maintenance-lldp-bgp-state.md): `TSA` takes the switch out of its
        neighbours' paths (only its loopback is announced), `TSB` brings it back, `TSC` says which: "System Mode:
        Normal" or "System Mode: Maintenance". TSA and TSB need root, as on the switch."""
        twin = self.host.twin
        if name == "TSC":
            return f"System Mode: {'Maintenance' if self.dev.device in twin.maintenance else 'Normal'}\n", "", 0
        if not root:
            return "", "Root privileges are required for this operation\n", 1
        twin.set_maintenance(self.dev.device, name == "TSA")
        return "", "", 0

    def _read(self, name: str) -> str | None:
        return self.host.files.get(self.host.path(name))


# --- builtins and coreutils ----------------------------------------------------------------------------------


def _echo(sh: SonicShell, args: list[str], stdin: str) -> Output:
    return " ".join(args) + "\n", "", 0


def _cat(sh: SonicShell, args: list[str], stdin: str) -> Output:
    if not args:
        return stdin, "", 0
    out, err = [], []
    for name in args:
        text = sh.host.files.get(sh.host.path(name))
        if text is None:
            err.append(f"cat: {name}: No such file or directory\n")
        else:
            out.append(text)
    return "".join(out), "".join(err), 1 if err else 0


def _mkdir(sh: SonicShell, args: list[str], stdin: str) -> Output:
    parents = "-p" in args
    for name in (a for a in args if not a.startswith("-")):
        path = sh.host.path(name).rstrip("/")
        if path in sh.host.dirs or path in sh.host.files:
            if not parents:
                # mkdir is atomic: the lock that decides between fabricd's confirm and the revert timer.
                return "", f"mkdir: cannot create directory '{name}': File exists\n", 1
            continue
        sh.host.dirs.add(path)
    return "", "", 0


def _rmdir(sh: SonicShell, args: list[str], stdin: str) -> Output:
    for name in args:
        path = sh.host.path(name).rstrip("/")
        if path not in sh.host.dirs:
            return "", f"rmdir: failed to remove '{name}': No such file or directory\n", 1
        sh.host.dirs.discard(path)
    return "", "", 0


def _rm(sh: SonicShell, args: list[str], stdin: str) -> Output:
    force = any(a.startswith("-") and "f" in a for a in args)
    for name in (a for a in args if not a.startswith("-")):
        path = sh.host.path(name).rstrip("/")
        if sh.host.files.pop(path, None) is None and path not in sh.host.dirs and not force:
            return "", f"rm: cannot remove '{name}': No such file or directory\n", 1
        sh.host.dirs.discard(path)
    return "", "", 0


def _kill(sh: SonicShell, args: list[str], stdin: str) -> Output:
    pids = [a for a in args if not a.startswith("-") and a not in ("TERM", "KILL", "HUP")]
    if not pids:
        return "", "kill: usage: kill [-s sigspec | -n signum | -sigspec] pid | jobspec ... or kill -l [sigspec]\n", 2
    err = []
    for pid in pids:
        if not pid.isdigit():
            err.append(f"-bash: kill: {pid}: arguments must be process or job IDs\n")
        elif int(pid) in sh.host.jobs:
            sh.host.jobs.discard(int(pid))
        else:
            err.append(f"-bash: kill: ({pid}) - No such process\n")
    return "", "".join(err), 1 if err else 0


def _hostname(sh: SonicShell, args: list[str], stdin: str) -> Output:
    return sh.dev.hostname + "\n", "", 0


def _ls(sh: SonicShell, args: list[str], stdin: str) -> Output:
    """`ls [-1] DIR...`: the names in a folder, one per line (coreutils prints one per line when not on a tty)."""
    folders = [a for a in args if not a.startswith("-")] or ["."]
    out: list[str] = []
    err: list[str] = []
    every = (*sh.host.files, *sh.host.dirs)
    for name in folders:
        base = sh.host.path(name).rstrip("/")
        if (
            base not in sh.host.dirs
            and base not in ("", "/tmp", "/etc/sonic")
            and not any(p.startswith(base + "/") for p in every)
        ):
            err.append(f"ls: cannot access '{name}': No such file or directory\n")
            continue
        names = {p[len(base) + 1 :].split("/", 1)[0] for p in every if p.startswith(base + "/")}
        out.extend(f"{n}\n" for n in sorted(names) if n)
    return "".join(out), "".join(err), 2 if err else 0


def _sleep(sh: SonicShell, args: list[str], stdin: str) -> Output:
    # A foreground sleep would stall every switch the twin serves from its one event loop.
    return "", "-bash: sleep: the twin runs sleep only inside a background job (`... &`)\n", 1


_BUILTINS: dict[str, Callable[[SonicShell, list[str], str], Output]] = {
    "echo": _echo,
    "cat": _cat,
    "mkdir": _mkdir,
    "rmdir": _rmdir,
    "rm": _rm,
    "kill": _kill,
    "ls": _ls,
    "hostname": _hostname,
    "sleep": _sleep,
    "true": lambda sh, a, s: ("", "", 0),
    "false": lambda sh, a, s: ("", "", 1),
    "set": lambda sh, a, s: ("", "", 0),  # `set +H` and the like: shell options the twin has no use for
}
