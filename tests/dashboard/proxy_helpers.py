"""A round-robin TCP proxy: several dashboard processes behind one address,
as a load balancer puts them. Each new connection goes to the next backend in
turn, and its bytes are copied both ways until either side closes; which
backend each connection went to is recorded, so tests can tell that both
were hit."""

from __future__ import annotations

import socket
import threading
from collections.abc import Sequence


class RoundRobinProxy:
    """Listens on a free loopback port and forwards each new connection to
    the next of `backends` (`http://host:port` URLs)."""

    def __init__(self, backends: Sequence[str]) -> None:
        self.backends = [_address(url) for url in backends]
        #: The backend index each accepted connection went to, in order.
        self.routed: list[int] = []
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=256)
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def mark(self) -> int:
        """How many connections were routed so far (see `since`)."""
        with self._lock:
            return len(self.routed)

    def since(self, mark: int) -> list[int]:
        """The backends of the connections accepted after `mark()`."""
        with self._lock:
            return self.routed[mark:]

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # closed
                return
            with self._lock:
                index = len(self.routed) % len(self.backends)
                self.routed.append(index)
                self._sockets.append(client)
            try:
                upstream = socket.create_connection(self.backends[index], timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._sockets.append(upstream)
            threading.Thread(
                target=self._relay, args=(client, upstream), daemon=True
            ).start()

    def _relay(self, client: socket.socket, upstream: socket.socket) -> None:
        """Copy both ways until both sides are done, then close both."""
        back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
        back.start()
        _pump(client, upstream)
        back.join()
        with self._lock:
            for sock in (client, upstream):
                if sock in self._sockets:
                    self._sockets.remove(sock)
                sock.close()

    def close(self) -> None:
        """Stop accepting and cut every forwarded connection."""
        try:
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        except OSError:
            pass
        self._listener.close()
        with self._lock:
            for sock in self._sockets:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()
        self._thread.join(5)


def _address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def _pump(src: socket.socket, dst: socket.socket) -> None:
    """Copy `src` to `dst` until `src` ends, then end `dst`'s writing half."""
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass
