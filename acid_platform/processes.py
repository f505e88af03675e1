"""The processes `make run` starts, each in a session of its own, and stopping all of them and whatever they started
(the scheduler first so a running compaction finishes, then SIGINT / SIGTERM / SIGKILL to what is left).

Nothing outlives the launcher, however it ends. Every process it starts carries `ACID_PLATFORM_RUN=<launcher
pid>@<ACID_HOME>` in its environment (inherited by all they start), and its children's sessions are known. A guard
(`start_guard`, this file run as a script) in a session of its own reads a pipe from the launcher; at its end of file
(the launcher died, even by SIGKILL) it stops every process carrying the mark or in those sessions: PR_SET_PDEATHSIG
reaches only the launcher's children, not what `airflow standalone` starts. Should the guard die too, the next
launcher on the same ACID_HOME stops what is left (`leftovers`, from the mark and the run record). Linux only (/proc).

Over 500 lines because starting, marking, guarding and stopping are one contract (what is started is what is
stopped, by the same marks); split, each half would have to know the other's marks.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

DRAIN_GRACE_S = 60.0  # after SIGTERM to the scheduler: running tasks finish (the scheduler waits for them)
STOP_GRACE_S = 30.0  # after SIGINT to standalone (SIGTERM to the writer), before SIGTERM to whatever is left
KILL_GRACE_S = 10.0  # after that SIGTERM, before SIGKILL
LOG_MAX_BYTES = 10 * 1024 * 1024  # a child's log is rotated when it would pass this (airflow standalone: ~180 KB/min)
LOG_BACKUPS = 2  # rotated logs kept: <name>.1 (newest) and <name>.2, so a log takes at most 3 x LOG_MAX_BYTES
RUN_VARIABLE = "ACID_PLATFORM_RUN"  # in the environment of every process of a run: "<launcher pid>@<ACID_HOME>"
GUARD_GRACE_S = 4.0  # after the launcher died: SIGTERM to what it left, SIGKILL after this


def _die_with_parent(signum: int):
    """A preexec_fn: the child gets `signum` when the launcher dies, even by SIGKILL (Linux; elsewhere nothing)."""
    def apply() -> None:
        with contextlib.suppress(Exception):
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, int(signum), 0, 0, 0)  # PR_SET_PDEATHSIG
    return apply if sys.platform.startswith("linux") else None


@dataclass(slots=True)
class Child:
    """A process the launcher started in a session of its own (its session id is its pid)."""

    name: str
    process: subprocess.Popen
    log: Path
    stop_signal: int
    copier: threading.Thread | None = None  # copies the child's output into its capped log

    @property
    def sid(self) -> int:
        return self.process.pid


def rotate_log(log: Path, *, backups: int = LOG_BACKUPS) -> None:
    """Shift `<name>` to `<name>.1`, `<name>.1` to `<name>.2`, ... keeping `backups` of them (the oldest goes), so
    logs do not grow across runs or within one (`copy_capped`)."""
    with contextlib.suppress(OSError):
        if log.stat().st_size == 0:
            return
    for generation in range(backups - 1, 0, -1):
        with contextlib.suppress(OSError):
            log.with_name(f"{log.name}.{generation}").replace(log.with_name(f"{log.name}.{generation + 1}"))
    with contextlib.suppress(OSError):
        log.replace(log.with_name(log.name + ".1"))


def copy_capped(stream, log: Path, *, max_bytes: int = LOG_MAX_BYTES, backups: int = LOG_BACKUPS) -> None:
    """Copy `stream` (a child's output, binary) into `log` until it ends, whole lines at a time, rotating
    (`rotate_log`) before a write would take the file past `max_bytes` (as logging's RotatingFileHandler does).
    Memory: a chunk of at most 64 KiB and the unfinished line."""
    chunk_size = max(1, min(65536, max_bytes // 2))
    output = open(log, "ab")
    try:
        size, carry = output.tell(), b""
        for chunk in iter(lambda: stream.read1(chunk_size), b""):
            data = carry + chunk
            cut = data.rfind(b"\n") + 1
            if cut == 0 and len(data) < chunk_size:
                carry = data  # wait for the end of the line
                continue
            lines, carry = (data[:cut], data[cut:]) if cut else (data, b"")  # a line longer than a chunk: as is
            if size and size + len(lines) > max_bytes:
                output.close()
                rotate_log(log, backups=backups)
                output = open(log, "ab")
                size = 0
            output.write(lines)
            output.flush()
            size += len(lines)
        output.write(carry)
    finally:
        output.close()
        stream.close()


def start_child(name: str, command: list[str], *, env: Mapping[str, str], log: Path, stop_signal: int,
                cwd: Path, max_bytes: int = LOG_MAX_BYTES, backups: int = LOG_BACKUPS) -> Child:
    """Start `command` in a session of its own, its output (stdout and stderr) going to `log`, capped at
    `max_bytes` a file with `backups` rotated files (`copy_capped`, on a thread of this process)."""
    with open(log, "ab") as output:
        output.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(command)}\n".encode())
    process = subprocess.Popen(command, env=dict(env), cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, start_new_session=True,
                               preexec_fn=_die_with_parent(stop_signal))
    copier = threading.Thread(target=copy_capped, args=(process.stdout, log),
                              kwargs={"max_bytes": max_bytes, "backups": backups}, name=f"{name}-log", daemon=True)
    copier.start()
    return Child(name, process, log, stop_signal, copier)


def session_processes(session_ids: Iterable[int]) -> list:
    """Live (not zombie) processes in any of these sessions, as psutil.Process objects."""
    import psutil

    wanted = set(session_ids)
    found = []
    for process in psutil.process_iter():
        try:
            if process.pid != os.getpid() and os.getsid(process.pid) in wanted \
                    and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except (OSError, psutil.Error):
            continue
    return found


def _alive(processes: Iterable) -> list:
    import psutil

    alive = []
    for process in processes:
        try:
            if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                alive.append(process)
        except psutil.Error:
            continue
    return alive


def _processes_of(child: Child) -> dict:
    """The child, its descendants and everything else in its session, by pid (psutil.Process objects)."""
    import psutil

    found = {}
    with contextlib.suppress(psutil.Error):
        parent = psutil.Process(child.process.pid)
        for process in [parent, *parent.children(recursive=True)]:
            found[process.pid] = process
    for process in session_processes([child.sid]):
        found.setdefault(process.pid, process)
    return found


def _schedulers(child: Child) -> list:
    """The `airflow scheduler` processes standalone started (they own the LocalExecutor and its running tasks)."""
    import psutil

    found = []
    with contextlib.suppress(psutil.Error):
        for process in psutil.Process(child.process.pid).children():
            with contextlib.suppress(psutil.Error):
                if "scheduler" in process.cmdline():
                    found.append(process)
    return found


def stop_children(children: list[Child], *, drain_s: float = DRAIN_GRACE_S, grace_s: float = STOP_GRACE_S,
                  kill_grace_s: float = KILL_GRACE_S, hurry=lambda: False, say=print) -> list:
    """Stop the children and everything in their sessions; returns what could not be stopped (empty when all did).

    Order: each child's stop signal to its process group, except that for `airflow standalone` the scheduler gets
    SIGTERM first and up to `drain_s` to let running tasks (a compaction) finish and report to the still running
    API server; then standalone gets SIGINT (its Ctrl-C: it terminates the other components). After `grace_s`,
    SIGTERM to whatever is left in the children's sessions, after `kill_grace_s` SIGKILL. `hurry()` returning True
    (a second Ctrl-C) skips the waiting.
    """
    import psutil

    tracked = {}
    for child in children:
        tracked.update(_processes_of(child))

    def remaining() -> list:
        for child in children:
            child.process.poll()  # reap, so an exited child is not a zombie we wait for
        left = {p.pid: p for p in _alive(tracked.values())}
        for process in session_processes(child.sid for child in children):
            left.setdefault(process.pid, process)
        return list(left.values())

    def wait(processes, seconds: float) -> list:
        deadline = time.monotonic() + seconds
        left = processes()
        while left and time.monotonic() < deadline and not hurry():
            time.sleep(0.2)
            left = processes()
        return left

    def signal_group(child: Child, signum: int) -> None:
        if child.process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.process.pid, signum)

    airflow = [child for child in children if child.name == "airflow"]
    for child in children:
        if child not in airflow:
            signal_group(child, child.stop_signal)
    schedulers = [process for child in airflow for process in _schedulers(child)]
    if schedulers:
        say(f"  stopping the scheduler; running tasks may take up to {drain_s:.0f} s to finish (Ctrl-C again: kill)")
        for process in schedulers:
            with contextlib.suppress(psutil.Error):
                process.terminate()
        _drain(schedulers, drain_s, hurry=hurry, say=say)
    for child in airflow:
        if child.process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(child.process.pid, child.stop_signal)
    left = wait(remaining, grace_s)
    for signum, seconds in ((signal.SIGTERM, kill_grace_s), (signal.SIGKILL, 5.0)):
        if not left:
            break
        say(f"  {len(left)} process(es) still running ({_names(left)}); sending {signal.Signals(signum).name}")
        for process in left:
            with contextlib.suppress(psutil.Error):
                process.send_signal(signum)
        left = wait(remaining, seconds) if signum == signal.SIGTERM else _settle(remaining, seconds)
    for child in children:
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.process.wait(timeout=5)
        if child.copier is not None:
            child.copier.join(timeout=5)  # the rest of its output into its log
    if left:
        say(f"  could not stop process(es) {', '.join(str(p.pid) for p in left)}")
    return left


def _executor_workers(scheduler) -> tuple[list, bool]:
    """The scheduler's LocalExecutor worker processes, and whether they are all idle (no task process below them)."""
    import psutil

    workers, idle = [], True
    with contextlib.suppress(psutil.Error):
        for process in scheduler.children():
            with contextlib.suppress(psutil.Error):
                title = " ".join(process.cmdline())
                if "LocalExecutor" in title:
                    workers.append(process)
                    idle = idle and "<idle>" in title and not _alive(process.children())
    return workers, idle


def _drain(schedulers: list, seconds: float, *, hurry, say) -> None:
    """Wait for the schedulers to exit after SIGTERM, which they do once their running tasks finished.

    A scheduler then waits for every LocalExecutor worker to take its shutdown message; a worker that has not within
    a few seconds while nothing runs is stuck (workers ignore SIGINT and SIGTERM), and is killed, holding no work.
    """
    import psutil

    deadline = time.monotonic() + seconds
    idle_since = None
    while _alive(schedulers) and time.monotonic() < deadline and not hurry():
        time.sleep(0.2)
        states = [_executor_workers(scheduler) for scheduler in _alive(schedulers)]
        if not states or not all(workers and idle for workers, idle in states):
            idle_since = None
            continue
        idle_since = idle_since or time.monotonic()
        if time.monotonic() - idle_since < 3:
            continue
        stuck = [process for workers, _ in states for process in workers]
        say(f"  no task is running; stopping {len(stuck)} idle executor worker(s) the scheduler still waits for")
        for process in stuck:
            with contextlib.suppress(psutil.Error):
                process.kill()
        idle_since = None


def _names(processes: list) -> str:
    import psutil

    names = []
    for process in processes:
        with contextlib.suppress(psutil.Error):
            names.append(f"{process.pid} {' '.join(process.cmdline())[:60] or process.name()}")
    return ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")


def _settle(remaining, seconds: float) -> list:
    deadline = time.monotonic() + seconds
    left = remaining()
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = remaining()
    return left


def tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join("    " + line for line in text[-lines:])


# --- nothing outlives the launcher ----------------------------------------------------------------------------------
def run_marker(acid_home: Path) -> str:
    """The value of RUN_VARIABLE for a run of this launcher on `acid_home`."""
    return f"{os.getpid()}@{acid_home}"


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return b""


def platform_processes(*, marker: str | None = None, home: Path | None = None, sessions: Iterable[int] = (),
                       since_ticks: int = 0) -> dict[int, str]:
    """Live (not zombie) processes of a run, pid -> command line, this process left out: those whose environment holds
    RUN_VARIABLE=`marker` (with `home` instead: any run's mark for that ACID_HOME), and those in `sessions` started
    at or after `since_ticks` (clock ticks since boot, /proc/PID/stat field 22).

    A process that retitles itself (setproctitle: Airflow's API server, executor workers, log servers) wipes the
    environment /proc shows, so sessions are needed too. A session id is its leader's pid, which the kernel reuses
    only once no process is left in that session: a session counts while its leader is gone or carries the mark.
    Reads /proc: cost linear in the machine's processes; another user's processes never match a mark."""
    prefix = f"{RUN_VARIABLE}=".encode()
    table: dict[int, tuple[bytes, int, int]] = {}  # pid -> (state, session, start ticks)
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and (stat := _read(f"/proc/{entry.name}/stat")):
            fields = stat[stat.rindex(b")") + 2:].split()  # after "pid (comm) "
            table[int(entry.name)] = (fields[0], int(fields[3]), int(fields[19]))
    marks: dict[int, bool] = {}

    def marked(pid: int) -> bool:
        if pid not in marks:
            marks[pid] = False
            for variable in _read(f"/proc/{pid}/environ").split(b"\0"):
                if variable.startswith(prefix):
                    value = variable[len(prefix):].decode(errors="replace")
                    marks[pid] = value == marker if marker is not None else \
                        home is not None and value.partition("@")[2] == str(home)
                    break
        return marks[pid]

    dead = (b"Z", b"X")
    live_sessions = {session for session in sessions
                     if session not in table or table[session][0] in dead or marked(session)}
    found = {}
    for pid, (state, session, start) in table.items():
        if pid == os.getpid() or state in dead:
            continue
        if (session in live_sessions and start >= since_ticks) or marked(pid):
            command = _read(f"/proc/{pid}/cmdline").replace(b"\0", b" ").strip()
            found[pid] = command.decode(errors="replace")[:100]
    return found


def record_run(path: Path, *, marker: str, sessions: Iterable[int]) -> None:
    """Write (whole, by rename) what a later launcher needs should this one and its guard die: the run's mark, the
    sessions of its children and when it started (boot id and clock ticks: session ids are only pids)."""
    record = {"run": marker, "boot_id": _read("/proc/sys/kernel/random/boot_id").decode().strip(),
              "since_ticks": _start_ticks(os.getpid()), "sessions": sorted(sessions)}
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(record) + "\n")
    partial.replace(path)


def leftovers(home: Path, record: Path) -> dict[int, str]:
    """Processes of earlier runs on `home` still alive (with its lock held, so no launcher of it runs): those with a
    run's mark for it, and those in the sessions `record` (`record_run`) lists, if it is from this boot."""
    try:
        recorded = json.loads(record.read_text())
        if recorded["boot_id"] != _read("/proc/sys/kernel/random/boot_id").decode().strip():
            raise ValueError("another boot")
        sessions, since = [int(session) for session in recorded["sessions"]], int(recorded["since_ticks"])
    except (OSError, ValueError, KeyError, TypeError):
        sessions, since = [], 0
    return platform_processes(home=home, sessions=sessions, since_ticks=since)


def describe(processes: Mapping[int, str], limit: int = 6) -> str:
    """"pid command, ..." for messages, at most `limit` of them."""
    shown = [f"{pid} {command}".strip() for pid, command in sorted(processes.items())[:limit]]
    return ", ".join(shown) + (f", ... ({len(processes)} in all)" if len(processes) > limit else "")


def stop_processes(find, *, grace_s: float = GUARD_GRACE_S, kill_s: float = 5.0) -> dict[int, str]:
    """SIGTERM (and SIGCONT) to every process `find()` returns (pid -> command line); after up to `grace_s` SIGKILL
    to what `find()` returns then (what they started meanwhile too), again until none is left or `kill_s` passed.
    Returns what is still there."""
    def send(pids, signum: int) -> None:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signum)

    left = find()
    send(left, signal.SIGTERM)
    send(left, signal.SIGCONT)  # a stopped one (Ctrl-Z, a debugger let go) acts on it too
    for seconds, signum in ((grace_s, None), (kill_s, signal.SIGKILL)):
        deadline = time.monotonic() + seconds
        while left and time.monotonic() < deadline:
            if signum is not None:
                send(left, signum)
            time.sleep(0.1)
            left = find()
    return left


def port_holder(port: int) -> str | None:
    """"pid N (command)" of the process listening on TCP `port` on this machine, when it can be seen (not another
    user's process unless this one is root); None otherwise."""
    import psutil

    with contextlib.suppress(psutil.Error, OSError):
        for connection in psutil.net_connections(kind="tcp"):
            if connection.status == psutil.CONN_LISTEN and connection.laddr and connection.laddr.port == port \
                    and connection.pid:
                with contextlib.suppress(psutil.Error):
                    return f"pid {connection.pid} ({' '.join(psutil.Process(connection.pid).cmdline())[:100]})"
                return f"pid {connection.pid}"
    return None


@dataclass(slots=True)
class Guard:
    """The launcher's end of the guard: `watch` names a child's session, `release` ends the guard after an orderly
    stop. Should the launcher die instead, the pipe's end of file sets the guard to work."""

    process: subprocess.Popen

    def _send(self, line: str) -> None:
        with contextlib.suppress(OSError, ValueError):  # the guard is gone: nothing to tell
            self.process.stdin.write(line.encode() + b"\n")
            self.process.stdin.flush()

    def watch(self, child: Child) -> None:
        self._send(f"session {child.sid}")

    def release(self, *, timeout: float = 10.0) -> None:
        self._send("exit")
        with contextlib.suppress(OSError, ValueError):
            self.process.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=timeout)


def start_guard(marker: str, *, log: Path, cwd: Path) -> Guard:
    """Start the guard of the run `marker`: this file as a script (the standard library only, no package import) in
    a session of its own, so neither the launcher's death nor a signal to its terminal or process group reaches it;
    its output goes to `log`.

    Raises:
        OSError: it could not be started.
    """
    with open(log, "ab") as output:
        output.write(f"=== {time.strftime('%Y-%m-%d %H:%M:%S')} guard of run {marker}\n".encode())
        process = subprocess.Popen([sys.executable, "-I", str(Path(__file__).resolve()), "--guard", marker],
                                   stdin=subprocess.PIPE, stdout=output, stderr=subprocess.STDOUT, cwd=cwd,
                                   start_new_session=True)
    return Guard(process)


def _start_ticks(pid: int) -> int:
    stat = _read(f"/proc/{pid}/stat")
    return int(stat[stat.rindex(b")") + 2:].split()[19])


def guard(marker: str, *, stream, out=None) -> int:
    """The guard's loop: read the launcher's lines ("session <sid>", "exit") from `stream` until it ends; at its end
    of file the launcher is gone without an orderly stop, so stop what carries `marker` or is in a watched session
    (started after the guard: a session id is a pid, and may be reused). Returns 0, or 1 when something survived."""
    out = out or sys.stdout
    since, sessions = _start_ticks(os.getpid()), set()
    for line in iter(stream.readline, b""):
        word, _, value = line.decode(errors="replace").strip().partition(" ")
        if word == "exit":
            return 0
        if word == "session" and value.isdigit():
            sessions.add(int(value))

    def find() -> dict[int, str]:
        return platform_processes(marker=marker, sessions=sessions, since_ticks=since)

    found = find()
    if not found:
        return 0
    print(f"{time.strftime('%H:%M:%S')} the launcher ended without stopping {len(found)} process(es); stopping "
          f"them: {describe(found)}", file=out, flush=True)
    left = stop_processes(find)
    if left:
        print(f"{time.strftime('%H:%M:%S')} could not stop: {describe(left)}", file=out, flush=True)
        return 1
    print(f"{time.strftime('%H:%M:%S')} stopped them all", file=out, flush=True)
    return 0


if __name__ == "__main__":  # the guard: python -I acid_platform/processes.py --guard <marker>, the pipe on stdin
    for ignored in (signal.SIGINT, signal.SIGHUP):
        signal.signal(ignored, signal.SIG_IGN)
    if len(sys.argv) != 3 or sys.argv[1] != "--guard":
        sys.exit("usage: processes.py --guard <run marker>, the launcher's pipe on standard input")
    sys.exit(guard(sys.argv[2], stream=sys.stdin.buffer))
