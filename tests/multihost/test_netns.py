"""The multi-host helper's partition is an honest one: the cut-off host gets
no reset and no error, only silence, and its connection carries on once the
link is back."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Sequence

from .netns import Network

ECHO = """
import socket
s = socket.socket()
s.bind(("0.0.0.0", 7000))
s.listen()
print("listening", flush=True)
c, _ = s.accept()
while data := c.recv(100):
    c.sendall(data)
"""

#: Inside the host that is cut off: one echo before the cut, one during
#: (which must time out, not fail), then the late reply once restored, and
#: a new connection attempted during the cut (which must not be refused).
CLIENT = """
import socket, sys
c = socket.create_connection((sys.argv[1], 7000), timeout=5)
c.sendall(b"before")
print(c.recv(100).decode(), flush=True)
sys.stdin.readline()  # the link is cut
c.sendall(b"during")
c.settimeout(1.5)
try:
    print("reply", c.recv(100).decode(), flush=True)
except TimeoutError:
    print("silence", flush=True)
try:
    socket.create_connection((sys.argv[1], 7000), timeout=1.5)
    print("connected", flush=True)
except TimeoutError:
    print("connect silence", flush=True)
except OSError as exc:
    print("connect error", exc.errno, flush=True)
sys.stdin.readline()  # the link is back
c.settimeout(20)
print("late", c.recv(100).decode(), flush=True)
"""


def test_a_cut_host_meets_silence_then_carries_on(
    make_network: Callable[[Sequence[str]], Network],
) -> None:
    """During a cut the host's sent data goes unanswered (no RST, no error)
    and a new connection times out; after restore() the same connection
    delivers the data sent during the cut and gets its reply."""
    net = make_network(["server", "cut"])
    server = net.popen(
        "server", [sys.executable, "-c", ECHO], stdout=subprocess.PIPE, text=True
    )
    assert server.stdout is not None
    assert server.stdout.readline().strip() == "listening"
    client = net.popen(
        "cut",
        [sys.executable, "-c", CLIENT, net.address("server")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert client.stdin is not None and client.stdout is not None
    assert client.stdout.readline().strip() == "before"
    net.cut("cut")
    client.stdin.write("cut\n")
    client.stdin.flush()
    assert client.stdout.readline().strip() == "silence"
    assert client.stdout.readline().strip() == "connect silence"
    net.restore("cut")
    client.stdin.write("back\n")
    client.stdin.flush()
    assert client.stdout.readline().strip() == "late during"
    assert client.wait(5) == 0
