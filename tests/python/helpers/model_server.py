"""A real HTTP server on loopback that stands in for a model hub in the download tests.

/files/NAME      a file, with Range requests (206), ETag, Content-Length
/OWNER/REPO/resolve/REV/NAME
                 the hub: 302 to the storage host (``localhost`` instead of ``127.0.0.1``, so
                 a client must see another host) with X-Linked-Etag (the file's SHA-256, or a
                 wrong one when ``lie`` is set); 401 without the token for NAMEs in ``gated``
/cdn/NAME        the storage host: as /files/
/control/cut/N   from now on, bodies stop after N bytes (``none``: whole bodies again)
/control/hits/NAME  how many requests /files/NAME had: {"hits": n}
anything else    404
``cut_after`` sends only that many bytes of a body, then drops the connection; ``delay`` waits
between blocks (so that two downloads overlap). ``send_length`` False leaves out Content-Length (the
body ends when the connection closes, so a cut body looks whole), ``send_etag`` False the ETag.
A Range request is served (206) unless its If-Range differs from the file's ETag (200, the whole
file); ``replace`` changes a file and so its ETag. ``requests`` logs (path, headers) of each request."""
from __future__ import annotations

import argparse
import hashlib
import http.server
import json
import sys
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional, Set, Tuple

BLOCK = 64 * 1024


class _QuietOnHangUp(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address) -> None:
        # The download tests cancel and cut transfers: a client that hung up is not the server's error.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class ModelServer:
    def __init__(self, files: Dict[str, Path], token: str = "hub-token") -> None:
        self.files = files
        self.sha = {name: hashlib.sha256(path.read_bytes()).hexdigest() for name, path in files.items()}
        self.token = token
        self.gated: Set[str] = set()
        self.lie = False
        self.cut_after: Optional[int] = None
        self.delay = 0.0
        self.send_length = True
        self.send_etag = True
        self.requests: List[Tuple[str, Dict[str, str]]] = []
        self._lock = threading.Lock()
        self._http = _QuietOnHangUp(("127.0.0.1", 0), self._handler())
        self._http.daemon_threads = True
        self.port = self._http.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._http.shutdown()
        self._http.server_close()

    def replace(self, name: str, path: Path) -> None:
        """Serves ``path`` as ``name`` from now on (with its own ETag)."""
        with self._lock:
            self.files[name] = path
            self.sha[name] = hashlib.sha256(path.read_bytes()).hexdigest()

    def hits(self, path: str) -> int:
        with self._lock:
            return sum(1 for p, _ in self.requests if p == path)

    def _handler(self):
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                with server._lock:
                    server.requests.append((self.path, dict(self.headers)))
                parts = self.path.strip("/").split("/")
                if len(parts) == 3 and parts[:2] == ["control", "cut"]:
                    server.cut_after = None if parts[2] == "none" else int(parts[2])
                    return self._reply(200, json.dumps({"cut_after": server.cut_after}).encode())
                if len(parts) == 3 and parts[:2] == ["control", "hits"]:
                    return self._reply(200, json.dumps({"hits": server.hits(f"/files/{parts[2]}")}).encode())
                if len(parts) == 2 and parts[0] in ("files", "cdn") and parts[1] in server.files:
                    return self._send_file(parts[1])
                if len(parts) == 5 and parts[2] == "resolve" and parts[4] in server.files:
                    return self._redirect(parts[4])
                self._reply(404, b"Entry not found")

            def _reply(self, status: int, body: bytes, headers: Dict[str, str] = {}) -> None:
                self.send_response(status)
                for k, v in {"Content-Length": str(len(body)), **headers}.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def _redirect(self, name: str) -> None:
                if name in server.gated and self.headers.get("Authorization") != f"Bearer {server.token}":
                    return self._reply(401, b"Access to this model is restricted")
                sha = "0" * 64 if server.lie else server.sha[name]
                self._reply(302, b"", {"Location": f"http://localhost:{server.port}/cdn/{name}",
                                       "X-Linked-Etag": f'"{sha}"'})

            def _send_file(self, name: str) -> None:
                path = server.files[name]
                size = path.stat().st_size
                etag = f'"{server.sha[name][:16]}"'
                start = 0
                wanted = self.headers.get("Range", "")
                if_range = self.headers.get("If-Range")
                # RFC 9110: without If-Range a Range is unconditional; with one, only the same ETag gets a part.
                if wanted.startswith("bytes=") and if_range in (None, etag):
                    start = int(wanted[len("bytes="):].split("-")[0])
                if start >= size and start > 0:
                    return self._reply(416, b"", {"Content-Range": f"bytes */{size}"})
                self.send_response(206 if start else 200)
                if server.send_length:
                    self.send_header("Content-Length", str(size - start))
                else:
                    self.send_header("Connection", "close")
                    self.close_connection = True
                if server.send_etag:
                    self.send_header("ETag", etag)
                if start:
                    self.send_header("Content-Range", f"bytes {start}-{size - 1}/{size}")
                self.end_headers()
                budget = server.cut_after
                with open(path, "rb") as f:
                    f.seek(start)
                    while True:
                        block = f.read(BLOCK if budget is None else min(BLOCK, budget))
                        if not block:
                            break
                        self.wfile.write(block)
                        if budget is not None:
                            budget -= len(block)
                            if budget <= 0:
                                self.close_connection = True
                                return
                        if server.delay:
                            time.sleep(server.delay)

        return Handler


def main() -> None:
    """Runs the server in its own process (for the R tests): python model_server.py NAME=PATH ...;
    prints its URL on the first line of stdout, then serves until killed."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("files", nargs="+", metavar="NAME=PATH")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds between 64 KiB blocks")
    args = parser.parse_args()
    server = ModelServer({name: Path(path) for name, path in (f.split("=", 1) for f in args.files)})
    server.delay = args.delay
    print(server.url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.close()


if __name__ == "__main__":
    sys.exit(main())
