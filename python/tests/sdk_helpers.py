# SPDX-License-Identifier: MIT
"""Helpers for the SDK tests: unique names and a small TCP proxy that can cut connections at chosen
moments (to prove the SDK's retries and stream re-attachment against the real daemon)."""

import secrets
import socket
import threading
import time
from typing import Callable, List, Optional


def unique(prefix: str = "sdk") -> str:
    return f"{prefix}-{secrets.token_hex(6)}"


class Conn:
    """One proxied connection: what the client sent and what the daemon answered (so far)."""

    def __init__(self, n: int):
        self.n = n
        self.request = bytearray()
        self.response = bytearray()
        self.cut = False


class TcpProxy:
    """Listens on 127.0.0.1:<port> and forwards every connection to UPSTREAM (host, port), which may be
    changed later (a daemon restarted on another port).

    cut_request(conn) is called after each piece the client sent has been forwarded; if it returns a
    number, the connection is cut (both sides closed) that many seconds later; meanwhile the rest of
    the request is still relayed, the answer no longer.
    cut_response(conn) likewise after each piece of the answer has been relayed."""

    def __init__(self, upstream_url: str):
        self.set_upstream(upstream_url)
        self.conns: List[Conn] = []
        self.cut_request: Optional[Callable[[Conn], Optional[float]]] = None
        self.cut_response: Optional[Callable[[Conn], Optional[float]]] = None
        self._lock = threading.Lock()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._closed = False
        self._threads: List[threading.Thread] = []
        t = threading.Thread(target=self._accept_loop, daemon=True)
        t.start()
        self._threads.append(t)

    def set_upstream(self, url: str) -> None:
        hostport = url.split("://", 1)[1].rstrip("/")
        host, port = hostport.rsplit(":", 1)
        self.upstream = (host, int(port))

    def close(self) -> None:
        """Stops listening (new connections are refused); connections already made stay up."""
        self._closed = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)   # wakes the accept() of the other thread
        except OSError:
            pass
        self._sock.close()

    def __enter__(self) -> "TcpProxy":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def requests_containing(self, needle: bytes) -> List[Conn]:
        with self._lock:
            return [c for c in self.conns if needle in bytes(c.request)]

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                client, _ = self._sock.accept()
            except OSError:
                return
            try:
                up = socket.create_connection(self.upstream, timeout=10)
            except OSError:
                client.close()
                continue
            up.settimeout(None)
            with self._lock:
                conn = Conn(len(self.conns))
                self.conns.append(conn)
            state = {"closed": False}
            lock = threading.Lock()

            def shut(delay: float, conn: Conn = conn, client: socket.socket = client, up: socket.socket = up,
                     state: dict = state, lock: threading.Lock = lock) -> None:
                if delay > 0:
                    time.sleep(delay)
                with lock:
                    if state["closed"]:
                        return
                    state["closed"] = True
                    conn.cut = True
                for s in (client, up):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    s.close()

            def pump(src: socket.socket, dst: socket.socket, record: bytearray,
                     decide: Callable[[], Optional[Callable[[Conn], Optional[float]]]], is_response: bool,
                     conn: Conn = conn,
                     state: dict = state, lock: threading.Lock = lock, shut: Callable[[float], None] = shut) -> None:
                while True:
                    try:
                        data = src.recv(65536)
                    except OSError:
                        data = b""
                    with lock:
                        if state["closed"]:
                            return
                    if not data:
                        try:
                            dst.shutdown(socket.SHUT_WR)
                        except OSError:
                            pass
                        return
                    record.extend(data)
                    if is_response and state.get("muted"):
                        continue        # a cut is scheduled: no more of the answer is relayed
                    try:
                        dst.sendall(data)
                    except OSError:
                        shut(0)
                        return
                    if state.get("muted"):
                        continue
                    policy = decide()
                    delay = policy(conn) if policy else None
                    if delay is not None:
                        state["muted"] = True
                        if delay > 0:
                            # The rest of the request still flows (it reaches the daemon); the answer does not.
                            threading.Thread(target=shut, args=(delay,), daemon=True).start()
                        else:
                            shut(0)
                            return

            for args in ((client, up, conn.request, lambda: self.cut_request, False),
                         (up, client, conn.response, lambda: self.cut_response, True)):
                t = threading.Thread(target=pump, args=args, daemon=True)
                t.start()
                self._threads.append(t)


def once(predicate: Callable[[Conn], bool], delay: float = 0.0) -> Callable[[Conn], Optional[float]]:
    """A cut policy that fires the first time PREDICATE(conn) holds (once per proxy)."""
    fired = {"done": False}
    lock = threading.Lock()

    def policy(conn: Conn) -> Optional[float]:
        with lock:
            if fired["done"] or not predicate(conn):
                return None
            fired["done"] = True
            return delay
    return policy
