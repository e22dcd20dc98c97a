"""`kb` commands for the tests, each in a process of its own, forked from one that has already
imported the command line's libraries.

A fresh interpreter spends about 0.6 s of CPU importing httpx, typer, rich and yaml before a
command starts, and the suite runs a few hundred commands. Here a server process imports those
libraries once; for each command it forks a child that takes the command's environment, working
folder, stdin, stdout and stderr, and only then imports kbcli (which reads its environment and
terminal when imported) and runs it as `python -m kbcli` does. Nothing a command does reaches the
server or the next command. tests/cli/test_commands.py still runs the installed `kb` and
`python -m kbcli` as real programs.

Run as a script, this module is the server: it reads requests (pickled, length-prefixed) on
stdin and answers on stdout."""
import atexit
import os
import pickle
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Optional

PRELOADED = ("httpx", "httpcore", "httpcore._sync.connection_pool", "typer", "typer.main", "click",
             "rich.console", "rich.table", "rich.progress", "rich.markup", "yaml", "ssl", "json", "runpy")


def _send(stream, value) -> None:
    data = pickle.dumps(value)
    stream.write(struct.pack(">I", len(data)) + data)
    stream.flush()


def _receive(stream):
    head = stream.read(4)
    if len(head) < 4:
        return None
    (size,) = struct.unpack(">I", head)
    return pickle.loads(stream.read(size))


def _child(args: list[str], env: dict, cwd: str, stdin: str, stdout: str, stderr: str) -> None:
    """Becomes the command: never returns."""
    code = 1
    try:
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        for fd, path, flags in ((0, stdin, os.O_RDONLY), (1, stdout, os.O_WRONLY), (2, stderr, os.O_WRONLY)):
            opened = os.open(path, flags)
            os.dup2(opened, fd)
            os.close(opened)
        sys.stdin = open(0, "r", encoding="utf-8", closefd=False)
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)
        sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False, buffering=1)
        sys.path[0] = os.getcwd()  # as `python -m` sets them; runpy writes argv[0]
        sys.argv = ["-m", *args]
        import runpy
        try:
            runpy.run_module("kbcli", run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as done:
            if done.code is None or isinstance(done.code, int):
                code = done.code or 0
            else:
                print(done.code, file=sys.stderr)
        threading._shutdown()  # what the interpreter does at exit: joins threads left running
        atexit._run_exitfuncs()
    except BaseException:
        import traceback
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)


def serve() -> None:
    for name in PRELOADED:
        __import__(name)
    requests, answers = sys.stdin.buffer, sys.stdout.buffer
    while (request := _receive(requests)) is not None:
        args, env, cwd, stdin, stdout, stderr, timeout = request
        pid = os.fork()
        if pid == 0:
            _child(args, env, cwd, stdin, stdout, stderr)
        deadline = time.monotonic() + timeout
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                _send(answers, os.waitstatus_to_exitcode(status))
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                _send(answers, None)
                break
            time.sleep(0.003)


class Runner:
    """One server per test process, started on first use; one command at a time."""

    def __init__(self, env: dict):
        self._env = env
        self._server: Optional[subprocess.Popen] = None
        self._lock = threading.Lock()

    def _start(self) -> subprocess.Popen:
        if self._server is None or self._server.poll() is not None:
            self._server = subprocess.Popen([sys.executable, __file__], stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, env=self._env, cwd=tempfile.gettempdir())
        return self._server

    def run(self, args: list[str], *, env: dict, cwd: Path, stdin: Optional[str],
            timeout: float) -> subprocess.CompletedProcess:
        with self._lock, tempfile.TemporaryDirectory() as files:
            paths = {name: str(Path(files) / name) for name in ("in", "out", "err")}
            Path(paths["in"]).write_text(stdin or "")
            Path(paths["out"]).touch()
            Path(paths["err"]).touch()
            server = self._start()
            _send(server.stdin, (list(args), dict(env), str(cwd), paths["in"], paths["out"], paths["err"], timeout))
            code = _receive(server.stdout)
            if code is None and server.poll() is not None:
                raise RuntimeError(f"the kb fork server ended with status {server.returncode}")
            if code is None:
                raise subprocess.TimeoutExpired(["kb", *args], timeout)
            return subprocess.CompletedProcess(["kb", *args], code, Path(paths["out"]).read_text(),
                                               Path(paths["err"]).read_text())


if __name__ == "__main__":
    serve()
