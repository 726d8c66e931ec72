"""One HTTP exchange bounded as a whole: connecting, sending, the status line, the headers and the body.

``http.client`` bounds each socket operation by the connection's timeout, never the answer: a
server that sends one byte every 0.3 s with a 0.5 s timeout is waited on for ever. Here every
exchange has an absolute deadline. The socket's timeout is the time left when the exchange
starts (so no single wait outlasts it), and a watchdog shuts the socket down when the deadline
passes, which ends whatever read or write is blocked on it at once. Name resolution, which no
socket timeout bounds, runs in a helper thread waited on only until the deadline.

Each exchange arms its own watchdog on its own connection, so threads calling at once (one
keep-alive connection each) never touch another's socket.
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import threading
import time

__all__ = ["connection", "exchange"]


def connection(https: bool, host: str, port: int | None, timeout: float) -> http.client.HTTPConnection:
    """A keep-alive connection to ``host:port`` whose connecting (name resolution included) keeps to
    the connection's timeout, which :func:`exchange` sets to the time left before each request."""
    cls = http.client.HTTPSConnection if https else http.client.HTTPConnection
    conn = cls(host, port, timeout=timeout)
    # http.client connects through this attribute (socket.create_connection), whose name lookup no
    # timeout bounds; it is the one seam that keeps HTTPS's TLS wrapping and proxies as they are.
    conn._create_connection = _create_connection
    return conn


def exchange(conn: http.client.HTTPConnection, method: str, path: str, payload: bytes | None,
             headers: dict[str, str], deadline: float) -> tuple[int, bytes, bool]:
    """Send one request on ``conn`` and read its whole answer by ``deadline`` (``time.monotonic()``).

    Returns ``(status, body, will_close)``. Raises :class:`TimeoutError` when the deadline passed
    first (the connection is then unusable: drop it), or the transport's own error
    (``OSError``, ``http.client.HTTPException``) when it failed sooner.
    """
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError("the deadline passed before the request was sent")
    conn.timeout = remaining
    if conn.sock is not None:
        conn.sock.settimeout(remaining)
    watchdog = _Watchdog(conn, remaining)
    try:
        conn.request(method, path, body=payload, headers=headers)
        resp = conn.getresponse()
        raw = resp.read()
    except (OSError, http.client.HTTPException):
        if watchdog.stop():
            raise TimeoutError("no complete answer by the deadline") from None
        raise
    if watchdog.stop():
        # Shut down mid-answer: what was read may look whole (a header cut short ends the headers).
        raise TimeoutError("no complete answer by the deadline")
    return resp.status, raw, resp.will_close


class _Watchdog:
    """Shuts ``conn``'s socket down after ``seconds`` unless stopped first; :meth:`stop` says whether it fired."""

    def __init__(self, conn: http.client.HTTPConnection, seconds: float):
        self._conn = conn
        self._lock = threading.Lock()
        self._stopped = self._fired = False
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True   # never what keeps a process alive
        self._timer.start()

    def _fire(self) -> None:
        with self._lock:
            if self._stopped:
                return
            self._fired = True
            sock = self._conn.sock
            if sock is not None:
                try:
                    # socket.socket's own shutdown, also for a TLS socket: ssl's would unwrap it
                    # under the reading thread's feet; this one makes that read see the end at once.
                    socket.socket.shutdown(sock, socket.SHUT_RDWR)
                except OSError:
                    pass

    def stop(self) -> bool:
        """Disarm; after this returns the socket is never shut down by this watchdog. True if it fired."""
        with self._lock:
            self._stopped = True
            fired = self._fired
        self._timer.cancel()
        return fired


def _create_connection(address: tuple[str, int], timeout: float | object = None,
                       source_address: tuple[str, int] | None = None) -> socket.socket:
    """``socket.create_connection`` with the lookup of the host's addresses inside ``timeout`` too."""
    host, port = address
    deadline = time.monotonic() + timeout if isinstance(timeout, (int, float)) else None
    last: OSError | None = None
    for family, kind, proto, _, sockaddr in _addresses(host, port, deadline):
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise TimeoutError(f"connecting to {host}:{port} took longer than {timeout:g} s")
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(left)
            if source_address:
                sock.bind(source_address)
            sock.connect(sockaddr)
            return sock
        except OSError as exc:
            sock.close()
            last = exc
    raise last if last is not None else OSError(f"{host}: no address to connect to")


def _addresses(host: str, port: int, deadline: float | None) -> list[tuple]:
    """``getaddrinfo`` for a TCP connection, given up at ``deadline``: the system resolver cannot be interrupted,
    so a name is looked up in a daemon thread that is left to finish alone if it outlasts the deadline."""
    try:
        ipaddress.ip_address(host)
        literal = True
    except ValueError:
        literal = False
    if literal or deadline is None:
        return socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)
    found: list = []

    def lookup() -> None:
        try:
            found.append(socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM))
        except OSError as exc:
            found.append(exc)

    worker = threading.Thread(target=lookup, daemon=True, name=f"resolve {host}")
    worker.start()
    worker.join(max(0.0, deadline - time.monotonic()))
    if not found:
        raise TimeoutError(f"looking up {host} took longer than the deadline")
    if isinstance(found[0], OSError):
        raise found[0]
    return found[0]
