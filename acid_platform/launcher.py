"""`make run`: the whole platform on one machine — Airflow standalone with this repo's DAGs, Spark in local mode, an
ACID metastore and warehouse with demo tables, and a writer streaming transactions into them.

    python -m acid_platform               set up, start, print the UI address and login, run until Ctrl-C
    python -m acid_platform --setup-only  only the idempotent set-up (Airflow DB, connections, pool, demo tables)

Everything lives under ACID_HOME (default `.acid-home` in the checkout): `airflow/` (AIRFLOW_HOME: airflow.cfg, the
SQLite metadata DB, the generated login), `warehouse/` (the SQLite metastore `metastore.db` and the tables) and
`logs/`. The `acid` command run with the same ACID_HOME uses the same metastore and warehouse (both come from
`acid_core.metastore.default_url` / `default_warehouse`, so ACID_METASTORE_URL and ACID_WAREHOUSE are honoured alike).

Set-up runs Airflow's own steps in a child process that gets the platform's environment before it first imports
Airflow (Airflow reads its configuration once, at import): write airflow.cfg (as the `airflow` command does), migrate
the metadata DB (`airflow db migrate`), create or update the connections `acid_metastore` and `spark_default` and the
pool `acid_compaction` through Airflow's ORM, create the demo tables. Then the writer (`python -m acid_platform.demo`) and
`airflow standalone` start, each in its own session; Ctrl-C or SIGTERM stops both and everything they started: the
writer gets SIGTERM, the scheduler SIGTERM first (running tasks finish and report while the API server still answers),
then standalone SIGINT (its own Ctrl-C), then SIGTERM and finally SIGKILL go to whatever is left in either session.
Should the launcher itself be killed (SIGKILL, a closed terminal), its guard stops everything of the run within a few
seconds (`acid_platform.processes`); a launcher finding processes of a dead one on its ACID_HOME stops them first.
Linux only.

Exit status: 0 after a requested stop, 1 when something failed (the message names the log to read), 2 on bad settings
(checked before anything starts).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import signal
import sys
import time
import urllib.request
from pathlib import Path

from acid_core.errors import AcidError, UsageError, exit_status
from acid_core.metastore.codes import CompactionState
from acid_core.metastore.engine import redact
from acid_platform.bootstrap import set_up
from acid_platform.processes import (
    RUN_VARIABLE,
    Child,
    Guard,
    describe,
    leftovers,
    port_holder,
    record_run,
    rotate_log,
    run_marker,
    start_child,
    start_guard,
    stop_children,
    stop_processes,
    tail,
)
from acid_platform.settings import (
    SPARK_MASTER,
    Settings,
    check_java,
    check_port,
    load_settings,
    platform_environment,
    prepare_home,
)

HEALTH_PATH = "/api/v2/monitor/health"
RUN_RECORD = "platform.pids"  # in ACID_HOME: the running launcher's mark and sessions (processes.record_run)
STARTUP_TIMEOUT_S = 300.0
WATCH_INTERVAL_S = 10.0


class Launcher:
    """Runs set-up, the writer and `airflow standalone` until asked to stop."""

    def __init__(self, settings: Settings, *, out=None) -> None:
        self.settings = settings
        self.out = out or sys.stdout
        self.env = {**platform_environment(settings), RUN_VARIABLE: run_marker(settings.acid_home)}
        self.children: list[Child] = []
        self.guard: Guard | None = None
        self.sessions: set[int] = set()  # of every child started, for the run record
        self.stop_reason: str | None = None
        self.signals_seen = 0
        self._states: dict[int, CompactionState] = {}
        self._watching = False
        self._store = None

    def say(self, message: str = "") -> None:
        with contextlib.suppress(OSError):  # the terminal is gone (closed: SIGHUP); stopping goes on all the same
            print(message, file=self.out, flush=True)

    def _started(self, child: Child) -> Child:
        """Track a child just started: its session to the guard and the run record, so neither the launcher's death
        nor its guard's leaves it running."""
        self.children.append(child)
        self.sessions.add(child.sid)
        if self.guard is not None:
            self.guard.watch(child)
        with contextlib.suppress(OSError):  # without the record a later start finds them by their mark only
            record_run(self.settings.acid_home / RUN_RECORD, marker=self.env[RUN_VARIABLE], sessions=self.sessions)
        return child

    # signals
    def _on_signal(self, signum, frame) -> None:
        self.signals_seen += 1
        if self.stop_reason is None:
            self.stop_reason = signal.Signals(signum).name

    def _install_signal_handlers(self) -> None:
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, self._on_signal)

    def _sleep(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while self.stop_reason is None and time.monotonic() < deadline:
            time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))

    # steps
    def _run_setup(self) -> dict:
        report = self.settings.airflow_home / "platform-setup.json"
        report.unlink(missing_ok=True)
        log = self.settings.logs / "setup.log"
        child = self._started(start_child("set-up", [sys.executable, "-m", "acid_platform", "--setup-only",
                                                     "--report", str(report)], env=self.env, log=log,
                                          stop_signal=signal.SIGTERM, cwd=self.settings.acid_home))
        while child.process.poll() is None and self.stop_reason is None:
            time.sleep(0.2)
        if self.stop_reason is not None:
            raise _Stopped()
        self.children.remove(child)
        if child.process.returncode != 0 or not report.exists():
            raise AcidError(f"set-up failed (exit status {child.process.returncode}); its log {log} ends with:\n"
                            f"{tail(log)}")
        return json.loads(report.read_text())

    def _health(self) -> dict | None:
        try:
            with urllib.request.urlopen(self.settings.api_url + HEALTH_PATH, timeout=3) as response:
                return json.loads(response.read()) if response.status == 200 else None
        except (OSError, ValueError):
            return None

    def _check_running(self) -> None:
        for child in list(self.children):
            status = child.process.poll()
            if status is None:
                continue
            if child.name == "airflow":
                raise AcidError(f"airflow standalone exited with status {status}; its log {child.log} ends with:\n"
                                f"{tail(child.log)}")
            self.children.remove(child)
            self.say(f"The {child.name} stopped with exit status {status}; see {child.log}. Airflow keeps running.")

    def _wait_until_ready(self) -> dict:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        health = None
        while self.stop_reason is None and time.monotonic() < deadline:
            self._check_running()
            health = self._health()
            if health is not None:
                break
            self._sleep(1.0)
        if self.stop_reason is not None:
            raise _Stopped()
        if health is None:
            raise AcidError(f"the Airflow API server did not answer {self.settings.api_url}{HEALTH_PATH} within "
                            f"{STARTUP_TIMEOUT_S:.0f} s; see {self.settings.logs / 'airflow-standalone.log'}")
        # The API answers before the scheduler's first heartbeat: give the components a moment to report healthy.
        settle = time.monotonic() + 60
        while self.stop_reason is None and time.monotonic() < settle and not _all_healthy(health):
            self._sleep(1.0)
            self._check_running()
            health = self._health() or health
        return health

    def _login_lines(self, setup: dict) -> list[str]:
        if setup["all_admins"]:
            return ["  login:    none needed (simple_auth_manager_all_admins is set: everyone is admin)"]
        try:
            passwords = json.loads(Path(setup["passwords_file"]).read_text())
        except (OSError, ValueError):
            passwords = {}
        lines = []
        for user in setup["users"]:
            password = passwords.get(user)
            if password is None:
                lines.append(f"  login:    {user} (password not found in {setup['passwords_file']})")
                continue
            verified = self._login_works(user, password)
            lines.append(f"  login:    {user} / {password}" + ("" if verified else "   (the API refused it!)"))
        lines.append(f"            (Airflow's SimpleAuthManager; passwords kept in {setup['passwords_file']})")
        return lines

    def _login_works(self, user: str, password: str) -> bool:
        request = urllib.request.Request(self.settings.api_url + "/auth/token", method="POST",
                                         data=json.dumps({"username": user, "password": password}).encode(),
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return response.status in (200, 201)
        except (OSError, ValueError):
            return False

    def _watch_compactions(self) -> None:
        """Print each compaction's state changes as the DAGs move it (initiated, working, ready for cleaning, ...)."""
        from acid_core.metastore import Metastore

        try:
            if self._store is None:
                self._store = Metastore(self.settings.metastore_url, warehouse=self.settings.warehouse, pool_size=1)
            entries = sorted(self._store.compactions.show(), key=lambda entry: entry.id)
        except AcidError:
            return
        if not self._watching:  # the first look: remember the history, report only what happens next
            self._watching = True
            self._states = {entry.id: entry.state for entry in entries}
            if entries:
                self.say(f"  ({len(entries)} compaction(s) from earlier runs: SHOW COMPACTIONS lists them)")
            return
        for entry in entries:
            if self._states.get(entry.id) == entry.state:
                continue
            self._states[entry.id] = entry.state
            where = f"{entry.database}.{entry.table}" + (f"/{entry.partition}" if entry.partition else "")
            failed = entry.state in (CompactionState.FAILED, CompactionState.REFUSED)
            detail = f": {entry.error_message}" if entry.error_message and failed else ""
            self.say(f"{time.strftime('%H:%M:%S')} compaction {entry.id} ({entry.type.display} of {where}): "
                     f"{entry.state.display}{detail}")

    def run(self) -> int:
        settings = self.settings
        self._install_signal_handlers()
        acid = _shown_path(Path(sys.executable).parent / "acid")
        self.say(f"ACID_HOME      {settings.acid_home}")
        self.say(f"metastore      {redact(settings.metastore_url)}")
        self.say(f"warehouse      {settings.warehouse}")
        self.say(f"Airflow home   {settings.airflow_home} (SQLite metadata DB, airflow.cfg)")
        self.say(f"DAGs, plugins  {settings.dags_folder}, {settings.plugins_folder}")
        self.say(f"logs           {settings.logs}")
        status = 0
        for name in ("setup.log", "writer.log", "airflow-standalone.log", "metrics.log", "guard.log"):
            rotate_log(settings.logs / name)
        try:
            try:
                self.guard = start_guard(self.env[RUN_VARIABLE], log=settings.logs / "guard.log",
                                         cwd=settings.acid_home)
            except OSError as exc:
                raise AcidError(f"could not start the guard that stops the platform should this launcher die: "
                                f"{exc}") from None
            self.say("Setting up: Airflow DB (db migrate), connections acid_metastore and spark_default, "
                     "pools " + ", ".join(f"{name} ({slots} slot(s))" for name, slots in settings.airflow_pools.items())
                     + ", demo tables ...")
            setup = self._run_setup()
            self.say(f"  done; tables {', '.join(setup['tables'])}")
            self._watch_compactions()
            writer_log = settings.logs / "writer.log"
            if settings.demo_writer:
                self._started(start_child(
                    "writer", [sys.executable, "-m", "acid_platform.demo"],  # URL from env; its log: standard error
                    env=self.env, log=writer_log, stop_signal=signal.SIGTERM, cwd=settings.acid_home))
            metrics_log = settings.logs / "metrics.log"
            if self.env.get("AIRFLOW__METRICS__STATSD_HOST") == "127.0.0.1":  # make run's own sink, not the user's
                self._started(start_child(
                    "metrics", [sys.executable, "-m", "acid_platform.metrics_sink",
                                "--port", self.env["AIRFLOW__METRICS__STATSD_PORT"]],
                    env=self.env, log=metrics_log, stop_signal=signal.SIGTERM, cwd=settings.acid_home))
            airflow_log = settings.logs / "airflow-standalone.log"
            self._started(start_child(
                "airflow", [str(Path(sys.executable).parent / "airflow"), "standalone"], env=self.env,
                log=airflow_log, stop_signal=signal.SIGINT, cwd=settings.acid_home))  # stray files land there too
            self.say((f"Started the writer (log {writer_log}) and " if settings.demo_writer else "Started ")
                     + f"airflow standalone (log {airflow_log}); waiting for the API server ...")
            health = self._wait_until_ready()
            self.say("")
            self.say(f"Airflow is ready: {settings.ui_url}")
            for line in self._login_lines(setup):
                self.say(line)
            self.say(f"  health:   {_health_summary(health)}")
            if any(child.name == "metrics" for child in self.children):
                self.say(f"  metrics:  {metrics_log.parent / 'acid-metrics.log'} (acid.*; everything, Airflow's too: "
                         f"{metrics_log.name}; StatsD received on udp://127.0.0.1:"
                         f"{self.env['AIRFLOW__METRICS__STATSD_PORT']})")
            self.say(f"  DAGs run every {self.env['ACID_INITIATOR_INTERVAL_SECONDS']} s (initiator) / "
                     f"{self.env['ACID_WORKER_INTERVAL_SECONDS']} s (worker) / "
                     f"{self.env['ACID_CLEANER_INTERVAL_SECONDS']} s (cleaner), Spark {SPARK_MASTER}; task logs in "
                     f"{settings.logs / 'airflow'}")
            self.say(f"  see what they did:  ACID_HOME={settings.acid_home} {acid} sql \"SHOW COMPACTIONS\"")
            self.say(f"  the writer's work:  ACID_HOME={settings.acid_home} {acid} sql \"SHOW TRANSACTIONS\"")
            self.say("Press Ctrl-C to stop. Compactions as they happen:")
            next_watch = 0.0
            while self.stop_reason is None:
                self._check_running()
                if time.monotonic() >= next_watch:
                    self._watch_compactions()
                    next_watch = time.monotonic() + WATCH_INTERVAL_S
                self._sleep(0.5)
        except _Stopped:
            pass
        except AcidError as exc:
            self.say(f"make run: {exc}")
            status = 1
        finally:
            reason = self.stop_reason or "an error"
            if self.children:
                self.say(f"\nStopping ({reason}): {', '.join(child.name for child in self.children)} ...")
                if not stop_children(self.children, hurry=lambda: self.signals_seen > 1, say=self.say):
                    (settings.acid_home / RUN_RECORD).unlink(missing_ok=True)
            if self._store is not None:
                self._store.close()
            if self.guard is not None:
                self.guard.release()  # an orderly stop: nothing left for it
        self.say(f"Stopped{' after an error' if status else ''}. State kept in {settings.acid_home}; "
                 "`make run` again continues from it.")
        return status


class _Stopped(Exception):
    """A stop was requested (Ctrl-C / SIGTERM) before start-up finished."""


def _all_healthy(health: dict) -> bool:
    return all((health.get(name) or {}).get("status") == "healthy"
               for name in ("metadatabase", "scheduler", "dag_processor", "triggerer"))


def _health_summary(health: dict) -> str:
    return ", ".join(f"{name} {(health.get(name) or {}).get('status') or 'unknown'}"
                     for name in ("metadatabase", "scheduler", "dag_processor", "triggerer"))


def _shown_path(path: Path) -> str:
    with contextlib.suppress(ValueError):
        relative = path.relative_to(Path.cwd())
        return str(relative) if str(relative).startswith(".") else f"./{relative}"
    return str(path)


def _lock_home(settings: Settings):
    """Hold ACID_HOME/platform.lock while running, so two launchers never share one home; returns the open file.

    Raises:
        UsageError: another launcher holds it.
    """
    handle = open(settings.acid_home / "platform.lock", "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        owner = handle.read().strip() or "unknown"
        handle.close()
        raise UsageError(f"ACID_HOME={settings.acid_home} is in use by another `make run` (pid {owner}); stop it "
                         "or set ACID_HOME to another directory") from None
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    return handle


def _check_port(settings: Settings) -> None:
    """`check_port`, naming the process that holds the port when it can be seen.

    Raises:
        UsageError: the port is taken.
    """
    try:
        check_port(settings)
    except UsageError as exc:
        holder = port_holder(settings.port)
        raise UsageError(f"{exc}; it is held by {holder}" if holder else str(exc)) from None


def _stop_leftovers(settings: Settings, *, say=print) -> None:
    """Stop the processes an earlier launcher on this ACID_HOME left running (it died, and so did its guard): with
    the home's lock held, any process carrying a run's mark for this home, or in a session its run record lists, is
    one. SQLite's locks go with them (a hot journal is rolled back by the next connection).

    Raises:
        AcidError: some of them could not be stopped (the message names them).
    """
    def find() -> dict[int, str]:
        return leftovers(settings.acid_home, settings.acid_home / RUN_RECORD)

    found = find()
    if not found:
        return
    say(f"make run: {len(found)} process(es) of an earlier `make run` on ACID_HOME={settings.acid_home} are still "
        f"running ({describe(found)}); stopping them")
    left = stop_processes(find, grace_s=10.0)
    if left:
        raise AcidError(f"could not stop the process(es) an earlier `make run` left on ACID_HOME="
                        f"{settings.acid_home}: {describe(left)}; stop them (kill -KILL <pid>) and run again")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m acid_platform", description=__doc__.split("\n\n")[0])
    parser.add_argument("--setup-only", action="store_true",
                        help="only set up Airflow's DB, the connections, the pool and the demo tables, then exit")
    parser.add_argument("--report", help="with --setup-only: write what was set up here as JSON")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        settings = load_settings()
        if args.setup_only:
            report = set_up(settings)
            if args.report:
                Path(args.report).write_text(json.dumps(report, indent=2) + "\n")
            print(json.dumps(report, indent=2))
            return 0
        if not sys.platform.startswith("linux"):
            raise UsageError(f"make run runs on Linux only (it follows its processes through /proc), not on "
                             f"{sys.platform}; run the platform in a Linux container or VM")
        earlier = settings.acid_home.is_dir()
        if not earlier:
            _check_port(settings)  # before anything is created
        prepare_home(settings)
        lock = _lock_home(settings)
    except AcidError as exc:
        print(f"make run: {exc}", file=sys.stderr)
        return exit_status(exc)
    try:
        if earlier:  # what a killed launcher left may hold the port: stop it first
            _stop_leftovers(settings, say=lambda message: print(message, file=sys.stderr, flush=True))
            _check_port(settings)
        check_java(platform_environment(settings))
    except AcidError as exc:
        lock.close()
        print(f"make run: {exc}", file=sys.stderr)
        return exit_status(exc)
    try:
        return Launcher(settings).run()
    finally:
        lock.close()


if __name__ == "__main__":
    sys.exit(main())
