"""`python -m newrllama serve` started as a user starts it, on a free loopback port, for tests and benchmarks."""
from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
import time
from typing import Optional

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    def __init__(self, *args: str, timeout: float = 120.0) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._log = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "newrllama", "serve", "--port", str(self.port), "--log-level", "warning", *args],
            stdout=self._log, stderr=subprocess.STDOUT)
        try:
            self.wait_until_healthy(timeout)
        except BaseException:
            self.stop()
            raise

    def log(self) -> str:
        self._log.seek(0)
        return self._log.read().decode("utf-8", "replace")

    def wait_until_healthy(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited with {self.process.returncode}:\n{self.log()}")
            try:
                r: Optional[httpx.Response] = httpx.get(self.url + "/health", timeout=2)
            except httpx.TransportError:
                r = None
            if r is not None and r.status_code == 200:
                return
            if r is not None and r.status_code == 500:
                raise RuntimeError(f"the server is unhealthy: {r.text}")
            time.sleep(0.1)
        raise RuntimeError(f"the server was not healthy after {timeout} s:\n{self.log()}")

    def metrics(self) -> dict:
        """The unlabelled metrics of /metrics as name -> value."""
        out = {}
        for line in httpx.get(self.url + "/metrics", timeout=30).text.splitlines():
            if line and not line.startswith("#") and "{" not in line:
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()

    def __enter__(self) -> "ServerProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
