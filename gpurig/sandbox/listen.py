"""The sandbox's git and apt servers, listening with a backlog a whole fleet fits in.

git-daemon listens with a backlog of 5 and Python's http.server with 5: when 50 sandbox hosts
converge at once the accept queue overflows, the kernel answers with SYN cookies, and clients
see "Connection reset by peer" (measured: 1 to 9 of 50 simultaneous clones failed). Here one
process listens with BACKLOG and hands each connection on: to `git-daemon --inetd` (one per
connection, as inetd would run it), or to a threading HTTP server for the apt repository.

    python -m gpurig.sandbox.listen ADDRESS PORT inetd ARGV...
    python -m gpurig.sandbox.listen ADDRESS PORT http DIRECTORY
"""

from __future__ import annotations

import functools
import socket
import subprocess
import sys
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

BACKLOG = 1024  # the kernel caps it at net.core.somaxconn (4096 on current kernels)


class FleetHTTPServer(ThreadingHTTPServer):
    request_queue_size = BACKLOG


def serve_http(address: str, port: int, directory: str) -> None:
    handler = functools.partial(SimpleHTTPRequestHandler, directory=directory)
    with FleetHTTPServer((address, port), handler) as server:
        server.serve_forever()


def serve_inetd(address: str, port: int, argv: list[str]) -> None:
    """Run `argv` per connection with the connection as its standard input and output."""
    running: list[subprocess.Popen] = []
    with socket.create_server((address, port), backlog=BACKLOG) as server:
        while True:
            conn, _ = server.accept()
            # Finished ones reaped here, not by ignoring SIGCHLD: children inherit that, and
            # upload-pack then cannot wait for its pack-objects.
            running = [p for p in running if p.poll() is None]
            with conn:
                running.append(subprocess.Popen(argv, stdin=conn, stdout=conn, close_fds=True))


def main(args: list[str]) -> None:
    address, port, mode, *rest = args
    if mode == "http":
        serve_http(address, int(port), rest[0])
    else:
        serve_inetd(address, int(port), rest)


if __name__ == "__main__":
    main(sys.argv[1:])
