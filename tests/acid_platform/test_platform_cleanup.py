"""`make run` as its user meets it, and leaving nothing behind (issue 23, item 7): a start prints a working login, its
DAGs run and its writer writes, and Ctrl-C stops it in order; a launcher killed with SIGKILL takes the writer,
`airflow standalone` and everything standalone started with it (its guard stops them), a closed terminal stops the
platform in order, and the next start on the same ACID_HOME stops what a dead launcher and guard left, then comes up.

One chain of four starts on one ACID_HOME and port serves the three tests (a start of the whole platform costs about
40 s of the two cores): the first comes up and is SIGKILLed, and its guard cleans up; the second starts after it,
and once it has started its writer and Airflow, the writer is stopped (SIGSTOP), its guard killed and it is
SIGKILLed; the third stops what the second left, comes up, shows what `make run` promises and stops in order on a
Ctrl-C typed on its terminal; the fourth starts its writer and Airflow and stops in order when its terminal closes.
The chain records what it saw; the tests check it.

Each launcher runs on a pseudo-terminal that is its controlling terminal, as under `make run` in a shell, so closing
the terminal sends it SIGHUP and Ctrl-C sends SIGINT as the kernel does. All traffic stays on loopback.
"""

from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import socket
import subprocess
import sys
import termios
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest
from support.airflow_api import call, login_token
from support.platform_processes import ROOT, clean_environment, free_port, kill_sessions, leftovers, sessions_of

READY = "Press Ctrl-C to stop"
STARTED = "waiting for the API server"  # the writer and `airflow standalone` are started
STARTUP_S = 300.0
GONE_WITHIN_S = 10.0  # the bound: nothing of a SIGKILLed launcher left after this


def _take_terminal() -> None:
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)  # the new session's controlling terminal: the pty on standard input


class Run:
    """`python -m acid_platform` as `make run` starts it, on a terminal of its own (a pty this test holds the master
    side of)."""

    def __init__(self, env: dict[str, str]) -> None:
        self.master, slave = pty.openpty()
        try:
            self.process = subprocess.Popen([sys.executable, "-m", "acid_platform"], env=env, cwd=ROOT, stdin=slave,
                                            stdout=slave, stderr=slave, start_new_session=True,
                                            preexec_fn=_take_terminal)
        finally:
            os.close(slave)
        self.output = ""
        self.sessions: set[int] = {self.process.pid}

    def read(self, seconds: float) -> None:
        """What the launcher printed within `seconds` (or until its terminal ends)."""
        deadline = time.monotonic() + seconds
        while self.master is not None and time.monotonic() < deadline:
            ready, _, _ = select.select([self.master], [], [], max(0.0, min(0.5, deadline - time.monotonic())))
            if not ready:
                continue
            try:
                data = os.read(self.master, 65536)
            except OSError:  # EIO: every process holding the terminal is gone
                data = b""
            if not data:
                return
            self.output += data.decode(errors="replace")

    def wait_until_ready(self, message: str = READY) -> None:
        deadline = time.monotonic() + STARTUP_S
        while message not in self.output:
            assert self.process.poll() is None, f"the launcher exited ({self.process.returncode}):\n{self.output}"
            assert time.monotonic() < deadline, f"no ready message within {STARTUP_S:.0f} s:\n{self.output}"
            self.read(1.0)

    def snapshot(self) -> tuple[dict[int, float], set[int]]:
        """Every process the launcher started so far (pid -> create time) and their sessions, for `leftovers`."""
        processes, sessions = sessions_of(psutil.Process(self.process.pid))
        processes[self.process.pid] = psutil.Process(self.process.pid).create_time()
        self.sessions |= sessions
        return processes, sessions

    def child(self, word: str) -> psutil.Process:
        """The launcher's child whose command line holds `word`."""
        return next(process for process in psutil.Process(self.process.pid).children()
                    if word in " ".join(process.cmdline()))

    def wait_exit(self, seconds: float) -> int:
        """The launcher's exit status, reading what it prints meanwhile."""
        deadline = time.monotonic() + seconds
        while self.process.poll() is None:
            assert time.monotonic() < deadline, f"the launcher did not exit within {seconds:.0f} s:\n{self.output}"
            self.read(0.5)
        self.read(1.0)
        return self.process.returncode

    def close_terminal(self) -> None:
        if self.master is not None:
            os.close(self.master)
            self.master = None

    def end(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)
        kill_sessions(self.sessions)
        self.close_terminal()


def _home_processes(home: Path) -> dict[int, str]:
    """Live processes whose environment holds ACID_HOME=<home> (the launcher gives it to all it starts, and they pass
    it on; a process that retitles itself wipes what /proc shows, the sessions find those), pid -> command line."""
    wanted = f"ACID_HOME={home}".encode()
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_bytes()
            if stat[stat.rindex(b")") + 2:].split()[0] == b"Z":
                continue
            if wanted in (entry / "environ").read_bytes().split(b"\0"):
                found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()[:120]
        except (OSError, ValueError):
            continue
    return found


def _command(pid: int) -> str:
    try:
        return " ".join(psutil.Process(pid).cmdline())
    except psutil.Error:
        return ""


def _run_of(pid: int) -> str | None:
    """The run mark (ACID_PLATFORM_RUN) in a process's environment: "" when it has none, None when it is gone or
    retitled itself (setproctitle wipes the environment /proc shows)."""
    try:
        variables = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    if not any(b"=" in variable for variable in variables):
        return None
    return next((v.split(b"=", 1)[1].decode() for v in variables if v.startswith(b"ACID_PLATFORM_RUN=")), "")


def _left_of(home: Path, processes: dict[int, float], sessions: set[int]) -> list[str]:
    """What is left of a run: its recorded processes and sessions, and anything on its ACID_HOME."""
    left = set(leftovers(processes, sessions))
    left.update(f"{pid} {command}" for pid, command in _home_processes(home).items())
    return sorted(left)


def _wait_gone(home: Path, processes: dict[int, float], sessions: set[int], seconds: float) -> tuple[list, float]:
    """Poll until nothing of the run is left or `seconds` passed; returns what is left and the time it took."""
    start = time.monotonic()
    left = _left_of(home, processes, sessions)
    while left and time.monotonic() - start < seconds:
        time.sleep(0.2)
        left = _left_of(home, processes, sessions)
    return left, time.monotonic() - start


def _base(port: int) -> str:
    return f"http://127.0.0.1:{port}"


def _dags(port: int, token: str, wanted: set[str], *, seconds: float) -> dict[str, bool]:
    """DAG id -> paused, once `wanted` are parsed or after `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        dags = {dag["dag_id"]: dag["is_paused"]
                for dag in call(_base(port), "/api/v2/dags?limit=100", token=token)["dags"]}
        if wanted <= set(dags) or time.monotonic() > deadline:
            return dags
        time.sleep(0.5)


def _logged(log: Path, line: str, *, seconds: float) -> bool:
    """Whether `line` shows up in `log` within `seconds`."""
    deadline = time.monotonic() + seconds
    while line not in (log.read_text() if log.exists() else ""):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def _port_free(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return False
    except OSError:
        return True


@dataclass
class Chain:
    """What the three starts showed (see the module's docstring)."""

    first: dict = field(default_factory=dict)
    second: dict = field(default_factory=dict)
    third: dict = field(default_factory=dict)
    fourth: dict = field(default_factory=dict)


@pytest.fixture(scope="module")
def chain(tmp_path_factory) -> Chain:
    home = tmp_path_factory.mktemp("cleanup") / "home"
    port = free_port()
    env = clean_environment(home, AIRFLOW__API__PORT=str(port))
    seen = Chain()
    runs: list[Run] = []
    try:
        # 1: SIGKILL to the launcher; its guard stops what it started.
        first = Run(env)
        runs.append(first)
        first.wait_until_ready()
        processes, sessions = first.snapshot()
        running = {pid: _command(pid) for pid in processes}
        seen.first.update(
            running=running,
            # all the platform's processes carry the run's mark (processes.RUN_VARIABLE)
            unmarked={pid: command for pid, command in running.items() if pid != first.process.pid
                      and "--guard" not in command and _run_of(pid) not in (f"{first.process.pid}@{home}", None)},
            mark=f"{first.process.pid}@{home}")
        first.process.send_signal(signal.SIGKILL)
        first.process.wait(timeout=30)
        seen.first["left"], seen.first["took"] = _wait_gone(home, processes, sessions, GONE_WITHIN_S)
        seen.first["port_free"] = _port_free(port)
        seen.first["guard_log"] = (home / "logs" / "guard.log").read_text()
        first.close_terminal()

        # 2: the next start gets past its checks and set-up and starts the writer and Airflow; then (not waiting for
        # Airflow: the third start shows a start coming up) a dead launcher and a dead guard leave its writer behind
        # (stopped: the SIGTERM it gets when the launcher dies waits while it is stopped).
        second = Run(env)
        runs.append(second)
        second.wait_until_ready(STARTED)
        writer_log, guard_log = home / "logs" / "writer.log", home / "logs" / "guard.log"
        # its handlers are set before it says so: a stop signal waits while it is stopped (SIG_DFL would kill it)
        seen.second.update(output=second.output, writing=_logged(writer_log, "writing into demo", seconds=60))
        second.snapshot()
        writer, guard = second.child("acid_platform.demo"), second.child("--guard")
        writer.suspend()
        guard.kill()
        second.process.send_signal(signal.SIGKILL)
        second.process.wait(timeout=30)
        seen.second.update(writer=writer.pid, writer_left=writer.is_running() and writer.pid in _home_processes(home))

        # 3: the next start stops the second's leftovers and comes up: it prints a working login, its DAGs are
        # parsed and not paused and its writer writes (what `make run` promises); Ctrl-C typed on its terminal (the
        # terminal sends SIGINT) stops it in order.
        third = Run(env)
        runs.append(third)
        third.wait_until_ready()
        seen.third.update(output=third.output, health=call(_base(port), "/api/v2/monitor/health"), port=port,
                          home=home,
                          writer_gone=not writer.is_running() or writer.status() == psutil.STATUS_ZOMBIE)
        processes, sessions = third.snapshot()
        guard = third.child("--guard")
        seen.third["others"] = {pid: command for pid, command in _home_processes(home).items()
                                if pid not in (third.process.pid, guard.pid)
                                and _run_of(pid) not in (f"{third.process.pid}@{home}", None)}
        seen.third["standalone"] = any("standalone" in _command(pid) for pid in processes)
        login = next(line for line in third.output.splitlines() if "login:" in line).split("login:")[1].split()
        seen.third["login"] = login
        seen.third["token"] = login_token(_base(port), login[0], login[2])
        seen.third["dags"] = _dags(port, seen.third["token"], {"acid_cleaner", "acid_housekeeping"}, seconds=90)
        seen.third["wrote"] = _logged(writer_log, "streamed a batch", seconds=60)
        stopping = len(third.output)
        os.write(third.master, b"\x03")  # Ctrl-C
        seen.third["status"] = third.wait_exit(180)
        seen.third["stop_output"] = third.output[stopping:]
        seen.third["left"], _ = _wait_gone(home, processes, sessions, GONE_WITHIN_S)
        third.close_terminal()

        # 4: a start whose terminal closes (SIGHUP) while Airflow starts, its writer writing, stops in order.
        fourth = Run(env)
        runs.append(fourth)
        fourth.wait_until_ready(STARTED)
        seen.fourth["wrote"] = _logged(writer_log, "streamed a batch", seconds=60)  # the log is this start's
        processes, sessions = fourth.snapshot()
        fourth.close_terminal()
        seen.fourth["status"] = fourth.process.wait(timeout=180)
        seen.fourth["left"], _ = _wait_gone(home, processes, sessions, GONE_WITHIN_S)
        seen.fourth["writer_log"] = writer_log.read_text()
        seen.fourth["guard_log"] = guard_log.read_text()
    finally:
        for run in runs:
            run.end()
    return seen


@pytest.mark.slow
@pytest.mark.airflow
def test_a_sigkilled_launcher_leaves_nothing_and_the_next_start_comes_up_and_stops_when_its_terminal_closes(chain):
    first, second, third = chain.first, chain.second, chain.third
    # standalone's own children (grandchildren of the launcher, no PR_SET_PDEATHSIG) are the ones at risk
    for part in ("api_server", "airflow scheduler", "airflow triggerer", "acid_platform.demo"):
        assert any(part in command for command in first["running"].values()), (part, first["running"])
    assert first["unmarked"] == {}
    print(f"after SIGKILL to the launcher, all {len(first['running'])} processes were gone in {first['took']:.1f} s")
    assert first["left"] == [], f"left {first['took']:.1f} s after SIGKILL:\n" + "\n".join(first["left"])
    assert first["port_free"]
    assert f"guard of run {first['mark']}" in first["guard_log"] and "stopped them all" in first["guard_log"], \
        first["guard_log"]

    # The next start on the same home and port gets going (the guard left nothing to stop), and so does the one
    # after it ...
    assert "earlier `make run`" not in second["output"] and "Started the writer" in second["output"]
    assert third["health"]["metadatabase"]["status"] == "healthy"
    # ... and a start closing its terminal (SIGHUP) stops in order.
    fourth = chain.fourth
    assert fourth["wrote"]
    assert fourth["status"] == 0  # a requested stop, the output to the closed terminal notwithstanding
    assert fourth["left"] == [], "left after the terminal closed:\n" + "\n".join(fourth["left"])
    assert "stopped after" in fourth["writer_log"]  # SIGTERM from the launcher, in order
    assert "without stopping" not in fourth["guard_log"]  # it left nothing to its guard


@pytest.mark.slow
@pytest.mark.airflow
def test_the_next_start_stops_what_a_dead_launcher_and_its_dead_guard_left(chain):
    second, third = chain.second, chain.third
    assert second["writing"] and second["writer_left"]
    assert "process(es) of an earlier `make run`" in third["output"] and f"{second['writer']} " in third["output"], \
        third["output"]
    assert third["health"]["metadatabase"]["status"] == "healthy"
    assert third["writer_gone"]
    assert third["others"] == {}  # nothing of the second run left


@pytest.mark.slow
@pytest.mark.airflow
def test_make_run_starts_airflow_prints_a_working_login_and_ctrl_c_stops_everything(chain):
    third = chain.third
    text = third["output"]
    assert f"Airflow is ready: http://localhost:{third['port']}" in text
    assert f"ACID_HOME={third['home']} " in text and 'sql "SHOW COMPACTIONS"' in text
    user, slash, password = third["login"][:3]
    assert user == "admin" and slash == "/" and password
    assert third["health"]["metadatabase"]["status"] == "healthy"
    assert third["token"]  # the printed login works

    # The DAGs get parsed and are not paused; the writer writes.
    wanted = {"acid_cleaner", "acid_housekeeping"}
    assert wanted <= set(third["dags"]) and not any(third["dags"][dag_id] for dag_id in wanted), third["dags"]
    assert third["wrote"]
    assert third["standalone"]

    stop = third["stop_output"]
    assert third["status"] == 0, text + stop
    assert "Stopping (SIGINT)" in stop and "Stopped." in stop
    assert "SIGKILL" not in stop, stop  # stopped in order, without killing
    assert third["left"] == [], "left after Ctrl-C:\n" + "\n".join(third["left"])
