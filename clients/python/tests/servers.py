"""Real HTTP servers for the tests: the apps under uvicorn in their own
processes, and a fake downstream service that counts calls by key."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

APPS = Path(__file__).resolve().parent / "apps"
# module:attribute of each app's ASGI application, and its extra environment.
TARGETS = {
    "fastapi": ("fastapi_app:app", {}),
    "django": ("django_site.asgi:application", {"DJANGO_SETTINGS_MODULE": "django_site.settings"}),
}


def free_port() -> int:
    """A TCP port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class AppServer:
    """One app under uvicorn, in a process of its own."""

    def __init__(self, app: str, database: str, downstream: str = "", **env: str) -> None:
        """Starts it."""
        target, extra = TARGETS[app]
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        environment = {**os.environ, **extra, "APP_DATABASE": database, "DOWNSTREAM_URL": downstream, **env}
        self.log = open(Path(os.environ.get("TMPDIR", "/tmp")) / f"idem-py-{app}-{self.port}.log", "w+b")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", target, "--app-dir", str(APPS), "--host", "127.0.0.1",
             "--port", str(self.port), "--log-level", "warning", "--no-access-log"],
            env=environment, stdout=self.log, stderr=subprocess.STDOUT)
        self._wait_ready()

    def _wait_ready(self) -> None:
        """Waits until the app answers GET /health."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the app exited: {self.output()}")
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.1)
        raise RuntimeError(f"the app did not start: {self.output()}")

    def output(self) -> str:
        """What the process printed so far."""
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def kill(self) -> None:
        """SIGKILL: the process dies as in a crash, its connections with it."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        """Stops the process (and closes its log)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        self.log.close()


class Downstream:
    """A fake downstream service: POST /ship counts calls by Idempotency-Key
    and answers the same tracking number for the same key."""

    def __init__(self) -> None:
        """Starts it."""
        calls: Counter[str] = Counter()
        self.calls = calls

        class Handler(BaseHTTPRequestHandler):
            """POST /ship, counted by key."""
            def do_POST(self) -> None:
                """Counts the call under its key and answers a tracking number."""
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                key = self.headers.get("Idempotency-Key") or ""
                calls[key] += 1
                body = json.dumps({"tracking": "T-" + key[:12]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                """Quiet."""
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        """Stops serving."""
        self.server.shutdown()
        self.server.server_close()
