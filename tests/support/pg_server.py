"""A throwaway PostgreSQL server for tests and benchmarks: initdb into a temp directory, 127.0.0.1 only, all removed at the end.

Used by `tests/conftest.py` (one server per pytest session) and by `bench/` scripts (put `tests/` on `sys.path`), so it imports
no pytest. psycopg2 is imported only when a database is created or dropped.

    with PostgresServer.start_new() as server:
        url = server.create_database("bench")   # postgresql+psycopg2://acid@127.0.0.1:PORT/bench

initdb and postgres refuse to run as root: as root the server commands run as the system user `acidpg` (created on first use, no
login shell) and the temp directory is handed to it. Three things stop the server, so a crashed run does not leave one behind:
`stop()` (the pytest session finalizer), an `atexit` hook, and a watchdog process that outlives a SIGKILLed parent.
"""

from __future__ import annotations

import atexit
import glob
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: Set to a directory holding initdb, pg_ctl and postgres to use those and nothing else (say a Homebrew `postgresql@15/bin`).
BIN_DIR_VARIABLE = "ACID_TEST_PG_BIN"
SERVER_COMMANDS = ("initdb", "pg_ctl", "postgres")
SYSTEM_USER = "acidpg"
SUPERUSER = "acid"
#: Throwaway data: durability off, enough connections for a metastore under concurrent tests.
SETTINGS = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "200",
}
START_TIMEOUT_SECONDS = 30
#: Where `ram_base_dir()` looks: Linux's shared-memory tmpfs.
RAM_DIR = Path("/dev/shm")
#: Free room `ram_base_dir()` asks for: a test run's databases take well under 1 GiB.
RAM_MIN_FREE_BYTES = 2 << 30
# Longest unix socket path most kernels accept (sun_path is 108 bytes with the trailing NUL).
_MAX_SOCKET_PATH = 107
_DATABASE_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


class PostgresServerError(RuntimeError):
    """The test PostgreSQL server could not be set up, started or used."""


def find_bin_dir() -> Path | None:
    """The directory holding initdb, pg_ctl and postgres, or None when there is none.

    Looks at `$ACID_TEST_PG_BIN` only when it is set; otherwise at the directory `pg_ctl` on PATH resolves to (Debian links
    /usr/local/bin/pg_ctl to /usr/lib/postgresql/15/bin), then at /usr/lib/postgresql/*/bin, newest major version first.
    """
    override = os.environ.get(BIN_DIR_VARIABLE)
    if override:
        return Path(override) if _has_server_commands(Path(override)) else None
    candidates = []
    on_path = shutil.which("pg_ctl")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)
    debian = glob.glob("/usr/lib/postgresql/*/bin")
    candidates.extend(Path(path) for path in sorted(debian, key=_major_version, reverse=True))
    return next((directory for directory in candidates if _has_server_commands(directory)), None)


def not_found_message() -> str:
    """What to do when `find_bin_dir()` found nothing."""
    override = os.environ.get(BIN_DIR_VARIABLE)
    if override:
        return (f"${BIN_DIR_VARIABLE}={override!r} does not hold {', '.join(SERVER_COMMANDS)}; "
                "point it at PostgreSQL's bin directory")
    return (f"no PostgreSQL server binaries ({', '.join(SERVER_COMMANDS)}) on PATH or in /usr/lib/postgresql/*/bin; install "
            f"PostgreSQL 15 (Debian: apt-get install postgresql-15) or set ${BIN_DIR_VARIABLE} to its bin directory")


class PostgresServer:
    """One PostgreSQL server in its own temp directory, reachable at 127.0.0.1:`port` as superuser `acid` (trust auth)."""

    def __init__(self, *, bin_dir: Path | str, base_dir: Path | str | None = None) -> None:
        self.bin_dir = Path(bin_dir)
        self.base_dir = None if base_dir is None else Path(base_dir)
        self.port: int | None = None
        self.temp_dir: Path | None = None
        self._run_as: pwd.struct_passwd | None = None
        self._watchdog: subprocess.Popen | None = None
        self._watchdog_pipe: int | None = None

    @classmethod
    def start_new(cls, *, base_dir: Path | str | None = None) -> PostgresServer:
        """Find the binaries and start a server.

        Raises:
            PostgresServerError: there are no binaries, or the server did not start.
        """
        bin_dir = find_bin_dir()
        if bin_dir is None:
            raise PostgresServerError(not_found_message())
        return cls(bin_dir=bin_dir, base_dir=base_dir).start()

    @property
    def data_dir(self) -> Path:
        return self._require_temp_dir() / "data"

    @property
    def socket_dir(self) -> Path:
        return self._require_temp_dir() / "socket"

    @property
    def log_file(self) -> Path:
        return self._require_temp_dir() / "postgres.log"

    @property
    def running(self) -> bool:
        return self.temp_dir is not None

    def url(self, database: str = "postgres") -> str:
        """SQLAlchemy URL of `database` on this server (default: the maintenance database)."""
        if self.port is None:
            raise PostgresServerError("the PostgreSQL test server is not running; call start() first")
        return f"postgresql+psycopg2://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def start(self) -> PostgresServer:
        """initdb into a new temp directory and start the server on a free loopback port; returns self.

        Raises:
            PostgresServerError: initdb or pg_ctl failed; the message carries their output and the server log's tail.
        """
        if self.temp_dir is not None:
            raise PostgresServerError(f"the PostgreSQL test server in {self.temp_dir} is already running")
        self._run_as = _server_user() if os.geteuid() == 0 else None
        self.temp_dir = Path(tempfile.mkdtemp(prefix="acid-pg-", dir=self.base_dir)).resolve()
        atexit.register(self.stop)
        try:
            self._prepare_temp_dir()
            self._start_watchdog()
            self._run("initdb", "--pgdata", str(self.data_dir), "--username", SUPERUSER, "--auth", "trust",
                      "--encoding", "UTF8", "--locale", "C", "--no-sync", "--no-instructions")
            self._start_on_free_port()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the server (immediate shutdown: the data is thrown away) and remove its temp directory; idempotent."""
        if self.temp_dir is None:
            return
        atexit.unregister(self.stop)
        try:
            if (self.data_dir / "postmaster.pid").exists():
                stopped = self._run_unchecked("pg_ctl", "stop", "--pgdata", str(self.data_dir), "--mode", "immediate",
                                              "--wait", "--timeout", "10", "--silent")
                if stopped.returncode != 0:
                    _kill_postmaster(self.data_dir, grace_seconds=5)
        finally:
            shutil.rmtree(self.temp_dir, ignore_errors=True)
            self.temp_dir = None
            self.port = None
            self._stop_watchdog()

    def halt(self) -> None:
        """Stop the server as an operator's restart does (fast shutdown: sessions are ended, committed data kept); the
        data directory and the port stay for `resume`."""
        if self.temp_dir is None:
            raise PostgresServerError("the PostgreSQL test server is not running")
        self._run("pg_ctl", "stop", "--pgdata", str(self.data_dir), "--mode", "fast", "--wait", "--timeout", "30",
                  "--silent")

    def resume(self) -> None:
        """Start a halted server again, on the same port and data."""
        if self.temp_dir is None:
            raise PostgresServerError("the PostgreSQL test server was stopped for good, not halted")
        self._run("pg_ctl", "start", "--pgdata", str(self.data_dir), "--log", str(self.log_file), "--wait",
                  "--timeout", str(START_TIMEOUT_SECONDS), "--silent")

    def create_database(self, name: str, *, template: str | None = None) -> str:
        """Create database `name` (lower-case letters, digits, underscores) and return its SQLAlchemy URL; with
        `template`, as a file copy of that database (which nobody may be connected to), else empty.

        Raises:
            ValueError: `name` or `template` is not a plain lower-case identifier.
            PostgresServerError: the server refused (for instance, the database exists).
        """
        if template is None:
            self._execute_admin("CREATE DATABASE {}", name)
        else:  # FILE_COPY: a few files copied (fsync is off) instead of every block written to the WAL
            self._execute_admin("CREATE DATABASE {} TEMPLATE {} STRATEGY FILE_COPY", name, template)
        return self.url(name)

    def drop_database(self, name: str) -> None:
        """Drop database `name` if it exists, ending any connections still open to it (PostgreSQL 13+ FORCE)."""
        self._execute_admin("DROP DATABASE IF EXISTS {} WITH (FORCE)", name)

    def __enter__(self) -> PostgresServer:
        return self if self.running else self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _execute_admin(self, statement: str, *databases: str) -> None:
        for database in databases:
            if not _DATABASE_NAME.fullmatch(database):
                raise ValueError(f"database name {database!r} must be 1-63 lower-case letters, digits or underscores, "
                                 "starting with a letter or underscore")
        if self.port is None:
            raise PostgresServerError("the PostgreSQL test server is not running; call start() first")
        import psycopg2
        from psycopg2 import sql

        try:
            connection = psycopg2.connect(host="127.0.0.1", port=self.port, user=SUPERUSER, dbname="postgres",
                                          connect_timeout=10)
        except psycopg2.Error as exc:
            raise PostgresServerError(f"cannot connect to the PostgreSQL test server at 127.0.0.1:{self.port}: {exc}"
                                      f"{self._log_tail()}") from exc
        try:
            connection.autocommit = True  # CREATE/DROP DATABASE cannot run inside a transaction block
            with connection.cursor() as cursor:
                cursor.execute(sql.SQL(statement).format(*map(sql.Identifier, databases)))
        except psycopg2.Error as exc:
            raise PostgresServerError(f"{statement.format(*databases)} failed: {exc}") from exc
        finally:
            connection.close()

    def _require_temp_dir(self) -> Path:
        if self.temp_dir is None:
            raise PostgresServerError("the PostgreSQL test server is not running; call start() first")
        return self.temp_dir

    def _prepare_temp_dir(self) -> None:
        socket_path = self.socket_dir / ".s.PGSQL.65535"
        if len(str(socket_path)) > _MAX_SOCKET_PATH:
            raise PostgresServerError(f"the unix socket path {socket_path} is longer than {_MAX_SOCKET_PATH} bytes; "
                                      "set TMPDIR to a shorter directory")
        self.socket_dir.mkdir()
        if self._run_as is not None:
            _check_reachable(self.temp_dir, self._run_as)
            for path in (self.temp_dir, self.socket_dir):
                os.chown(path, self._run_as.pw_uid, self._run_as.pw_gid)

    def _start_on_free_port(self) -> None:
        # A port found free can be taken before postgres binds it; try again on another port when that happens.
        for attempt in range(3):
            self.port = _free_loopback_port()
            self._write_settings()
            started = self._run_unchecked("pg_ctl", "start", "--pgdata", str(self.data_dir), "--log", str(self.log_file),
                                          "--wait", "--timeout", str(START_TIMEOUT_SECONDS), "--silent")
            if started.returncode == 0:
                return
            if "could not bind" not in self._log_tail() or attempt == 2:
                raise PostgresServerError(f"pg_ctl start failed (exit {started.returncode}): "
                                          f"{started.stdout.strip()} {started.stderr.strip()}{self._log_tail()}")

    def _write_settings(self) -> None:
        settings = {
            **SETTINGS,
            "listen_addresses": "127.0.0.1",
            "port": str(self.port),
            "unix_socket_directories": str(self.socket_dir),
        }
        # Appended after initdb's defaults: the last setting of a name wins, so a retry on a new port just appends again.
        lines = "".join(f"{name} = '{value}'\n" for name, value in settings.items())
        with open(self.data_dir / "postgresql.conf", "a", encoding="utf-8") as conf:
            conf.write("\n# acid test server\n" + lines)

    def _log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_file.read_text(encoding="utf-8", errors="replace")
        except (OSError, PostgresServerError):
            return ""
        return f"\n--- last lines of {self.log_file} ---\n" + "\n".join(text.splitlines()[-lines:])

    def _run(self, command: str, *arguments: str) -> None:
        completed = self._run_unchecked(command, *arguments)
        if completed.returncode != 0:
            raise PostgresServerError(f"{command} failed (exit {completed.returncode}): {completed.stdout.strip()} "
                                      f"{completed.stderr.strip()}")

    def _run_unchecked(self, command: str, *arguments: str) -> subprocess.CompletedProcess:
        """Run a server command, as `acidpg` when we are root, with only PATH and a C locale in its environment."""
        run_as = {}
        if self._run_as is not None:
            run_as = {"user": self._run_as.pw_uid, "group": self._run_as.pw_gid, "extra_groups": []}
        environment = {"PATH": f"{self.bin_dir}{os.pathsep}{os.defpath}", "LC_ALL": "C"}
        try:
            return subprocess.run([str(self.bin_dir / command), *arguments], env=environment, cwd=self.temp_dir,
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  timeout=START_TIMEOUT_SECONDS + 30, check=False, **run_as)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise PostgresServerError(f"cannot run {self.bin_dir / command}: {exc}") from exc

    def _start_watchdog(self) -> None:
        """Start a process that stops the server once this process is gone, however it ended (even SIGKILL)."""
        read_end, write_end = os.pipe()
        try:
            self._watchdog = subprocess.Popen(
                [sys.executable, "-I", "-S", str(Path(__file__).resolve()), "--watchdog", str(read_end), str(self.temp_dir)],
                pass_fds=[read_end], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True)  # its own session: a Ctrl-C to the test run's process group does not reach it
        except OSError:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)
        self._watchdog_pipe = write_end  # never written; its closing (by us or by the kernel on exit) wakes the watchdog

    def _stop_watchdog(self) -> None:
        if self._watchdog_pipe is not None:
            os.close(self._watchdog_pipe)
            self._watchdog_pipe = None
        if self._watchdog is not None:
            try:
                self._watchdog.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self._watchdog.kill()
                self._watchdog.wait()
            self._watchdog = None


def ram_base_dir(directory: Path = RAM_DIR) -> Path | None:
    """`directory` when it is a tmpfs mount (by /proc/mounts) this process can create directories in, with
    RAM_MIN_FREE_BYTES free, else None: a base for a throwaway server's data directory that costs no disk I/O.

    Why: on an ext4 disk creating a file costs about 0.3 ms of kernel time, and a `CREATE DATABASE ... TEMPLATE`
    copies about 400 files (300 ms; 11 ms on tmpfs); a test run creates one database per PostgreSQL test.
    """
    try:
        stats = os.statvfs(directory)
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return None
    if stats.f_bavail * stats.f_frsize < RAM_MIN_FREE_BYTES or not os.access(directory, os.W_OK | os.X_OK):
        return None
    target = str(directory.resolve())
    return directory if any(line.split()[1:3] == [target, "tmpfs"] for line in mounts) else None


def _has_server_commands(directory: Path) -> bool:
    return all(os.access(directory / command, os.X_OK) for command in SERVER_COMMANDS)


def _major_version(bin_dir: str) -> int:
    version = Path(bin_dir).parent.name
    return int(version) if version.isdigit() else -1


def _free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _server_user() -> pwd.struct_passwd:
    """The system user the server runs as when we are root, created (no home, no login shell) if missing."""
    try:
        return pwd.getpwnam(SYSTEM_USER)
    except KeyError:
        pass
    no_login = next((shell for shell in ("/usr/sbin/nologin", "/sbin/nologin") if os.path.exists(shell)), "/bin/false")
    try:
        created = subprocess.run(["useradd", "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent",
                                  "--shell", no_login, "--comment", "acid test PostgreSQL", SYSTEM_USER],
                                 stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise PostgresServerError(f"running as root, and cannot create the system user {SYSTEM_USER!r} for PostgreSQL "
                                  f"(initdb refuses root): {exc}; create it by hand or run the tests as another user") from exc
    try:
        return pwd.getpwnam(SYSTEM_USER)  # also covers a concurrent run having created it first
    except KeyError:
        raise PostgresServerError(f"useradd {SYSTEM_USER} failed (exit {created.returncode}): {created.stderr.strip()}; "
                                  "PostgreSQL refuses to run as root, so it needs that user") from None


def _check_reachable(directory: Path, user: pwd.struct_passwd) -> None:
    """Every parent of `directory` must let other users through, or the server user cannot reach its data directory."""
    for parent in directory.parents:
        if not os.stat(parent).st_mode & 0o001:
            raise PostgresServerError(f"{parent} is not searchable by other users, so {user.pw_name!r} cannot reach "
                                      f"{directory}; set TMPDIR to a directory such as /tmp")


def _kill_postmaster(data_dir: Path, *, grace_seconds: float) -> None:
    """Immediate shutdown by signal (SIGQUIT), then SIGKILL if the postmaster has not removed its pid file in time."""
    pid_file = data_dir / "postmaster.pid"
    try:
        pid = int(pid_file.read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return
    if not _is_postmaster_of(pid, data_dir):
        return  # a pid file left by a crashed server, its pid since reused: not ours to signal
    for sig in (signal.SIGQUIT, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + grace_seconds
        while pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        if not pid_file.exists():
            return


def _is_postmaster_of(pid: int, data_dir: Path) -> bool:
    """Whether `pid` runs postgres on `data_dir` (pg_ctl passes `-D data_dir`); trusted as such where there is no /proc."""
    try:
        command_line = Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return not Path("/proc/self").exists()
    except OSError:
        return False
    return os.fsencode(str(data_dir)) in command_line


def _watchdog_main(read_fd: int, temp_dir: Path) -> None:
    """Block until the parent's end of the pipe closes, then stop any server left in `temp_dir` and remove it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while os.read(read_fd, 4096):
        pass
    _kill_postmaster(temp_dir / "data", grace_seconds=5)
    shutil.rmtree(temp_dir, ignore_errors=True)


if __name__ == "__main__" and sys.argv[1:2] == ["--watchdog"]:
    _watchdog_main(int(sys.argv[2]), Path(sys.argv[3]))
