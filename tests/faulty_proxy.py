"""A flaky network between the tests and the S3 test server: a TCP proxy on 127.0.0.1.

It forwards every byte both ways, and fails responses as networks and object stores do:

* ``cut_rate``: per response chunk (one ``recv`` from the server), the chance that the
  connection is reset there, mid-body: the client has part of the response or none;
* ``lose_rate``: per response, the chance that it is dropped whole after the server
  answered, so the request was applied and the client sees a reset (a PUT, a conditional
  create or a multipart completion that succeeded though the client saw an error).

Faults are drawn from a seeded generator and counted (``cuts``, ``losses``). It runs in
threads of the process that starts it, or as ``python -m tests.faulty_proxy UPSTREAM PORT
CUT LOSE SEED STATS`` (then it writes its counts into ``STATS`` every second until killed).
Only addresses on this machine: the upstream is the test server on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import random
import socket
import struct
import sys
import threading
import time
from pathlib import Path

from tests.seeds import BASE

#: The faults' seed of this run: it changes per run, and the tests print it;
#: ``DYNBUCKET_FAULT_SEED`` repeats one.
SEED = int(os.environ.get("DYNBUCKET_FAULT_SEED", BASE))
_CHUNK = 16 * 1024
#: SO_LINGER on, 0 seconds: a close resets the connection.
_RESET = struct.pack("ii", 1, 0)


class FaultyProxy:
    """A proxy in front of ``upstream`` (``http://127.0.0.1:PORT``); ``endpoint`` is its
    own address; ``stop()`` ends it."""

    def __init__(
        self,
        upstream: str,
        cut_rate: float = 0.0,
        lose_rate: float = 0.0,
        seed: int = 0,
        port: int = 0,
    ) -> None:
        host, _, up_port = upstream.split("://", 1)[-1].rpartition(":")
        assert host in ("127.0.0.1", "localhost"), "the proxy only fronts a server here"
        self.upstream = ("127.0.0.1", int(up_port))
        self.cut_rate, self.lose_rate = cut_rate, lose_rate
        self.cuts = self.losses = self.responses = 0
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._server = socket.socket()
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._server.bind(("127.0.0.1", port))
        self._server.listen(128)
        self.endpoint = f"http://127.0.0.1:{self._server.getsockname()[1]}"
        self._stopped = False
        threading.Thread(target=self._accept, daemon=True, name="faulty-proxy").start()

    def set_rates(self, cut_rate: float, lose_rate: float) -> None:
        self.cut_rate, self.lose_rate = cut_rate, lose_rate

    def stats(self) -> dict[str, int]:
        return {"responses": self.responses, "cuts": self.cuts, "losses": self.losses}

    def stop(self) -> None:
        self._stopped = True
        self._server.close()

    def _draw(self, rate: float) -> bool:
        with self._lock:
            return rate > 0 and self._rng.random() < rate

    def _accept(self) -> None:
        while not self._stopped:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream, timeout=30)
            except OSError:
                client.close()
                continue
            threading.Thread(target=self._pipe, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, True), daemon=True).start()

    def _pipe(self, source: socket.socket, target: socket.socket, responses: bool) -> None:
        try:
            while True:
                data = source.recv(_CHUNK)
                if not data:
                    break
                if responses:
                    if data.startswith(b"HTTP/1."):
                        with self._lock:
                            self.responses += 1
                        if self._draw(self.lose_rate):
                            with self._lock:
                                self.losses += 1
                            break  # the server applied it; the client never hears
                    if self._draw(self.cut_rate):
                        with self._lock:
                            self.cuts += 1
                        target.sendall(data[: len(data) // 2])
                        break
                target.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, target):  # a reset both ways, waking the other direction
                try:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET)
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()


def main() -> None:
    upstream, port, cut, lose, seed, stats = sys.argv[1:7]
    proxy = FaultyProxy(upstream, float(cut), float(lose), int(seed), int(port))
    out = Path(stats)
    while True:
        out.write_text(json.dumps(proxy.stats()))
        time.sleep(1)


if __name__ == "__main__":
    main()
