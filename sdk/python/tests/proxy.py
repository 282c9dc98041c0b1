"""A TCP proxy on loopback between the client and the server, for the failures a real network has: connections cut
in the middle of a stream, a server that is out of reach for a while, a response lost after the server acted."""

from __future__ import annotations

import socket
import threading


class Proxy:
    def __init__(self, target_url: str) -> None:
        host_port = target_url.removeprefix("http://").rstrip("/")
        host, _, port = host_port.partition(":")
        self._target = (host, int(port))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self.sent: list[bytes] = []
        """Every chunk a client sent through the proxy, to check the headers it sent."""
        self.received: list[bytes] = []
        """Every chunk the server sent back through the proxy."""
        self.unreachable = False
        """While true, connections are closed as soon as they are accepted: the server is out of reach."""
        self.drop_responses_to = b""
        self.drops_left = 0
        """The next ``drops_left`` requests starting with ``drop_responses_to`` reach the server, but their
        response never reaches the client (the connection is cut instead)."""
        threading.Thread(target=self._accept, daemon=True).start()

    def cut(self) -> None:
        """Cuts every open connection, as a network failure or a restarting load balancer would."""
        with self._lock:
            sockets, self._open = self._open, []
        for sock in sockets:
            _close(sock)

    def sent_text(self) -> str:
        with self._lock:
            return b"".join(self.sent).decode("latin-1")

    def received_text(self) -> str:
        with self._lock:
            return b"".join(self.received).decode("latin-1")

    def close(self) -> None:
        _close(self._listener)
        self.cut()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self.unreachable:
                _close(client)
                continue
            try:
                upstream = socket.create_connection(self._target)
            except OSError:
                _close(client)
                continue
            with self._lock:
                self._open += [client, upstream]
            dropping = threading.Event()
            threading.Thread(target=self._upstream, args=(client, upstream, dropping), daemon=True).start()
            threading.Thread(target=self._downstream, args=(upstream, client, dropping), daemon=True).start()

    def _upstream(self, client: socket.socket, upstream: socket.socket, dropping: threading.Event) -> None:
        while True:
            try:
                chunk = client.recv(65536)
            except OSError:
                chunk = b""
            if not chunk:
                _close(upstream)
                return
            with self._lock:
                self.sent.append(chunk)
                if self.drops_left > 0 and self.drop_responses_to and chunk.startswith(self.drop_responses_to):
                    self.drops_left -= 1
                    dropping.set()
            try:
                upstream.sendall(chunk)
            except OSError:
                _close(client)
                return

    def _downstream(self, upstream: socket.socket, client: socket.socket, dropping: threading.Event) -> None:
        while True:
            try:
                chunk = upstream.recv(65536)
            except OSError:
                chunk = b""
            if not chunk or dropping.is_set():
                _close(client)
                _close(upstream)
                return
            with self._lock:
                self.received.append(chunk)
            try:
                client.sendall(chunk)
            except OSError:
                _close(upstream)
                return


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
