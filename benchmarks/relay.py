"""A delaying TCP relay: what a host 50-150 ms away costs, on one machine without netem.

    python -m benchmarks.relay --delay-ms 50 [--lifetime-s 3600] HOST:PORT [HOST:PORT ...]

For each target it listens on a loopback port of its own and forwards both directions, each
byte delivered `delay` after it arrived (so a round trip costs 2 x delay more), in order, with
the data still streaming while earlier bytes wait, as on a long link. It prints one JSON line,
`{"HOST:PORT": listening_port, ...}`, once it is listening, and stops after its lifetime, on
SIGTERM, or when its standard input (a pipe) closes.

It relays bytes and nothing else: SSH through it still checks the target's host key (point the
inventory's address and port at the relay, keep its `host_key`). The kernel's TCP handshake with
the relay cannot be delayed from user space, so the relay opens the upstream connection 3 x
delay (1.5 round trips) after accepting: the first bytes either side sends then arrive when they
would over a real link, where they wait for the handshake's round trip first.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import stat
import sys
from collections.abc import Iterable

CHUNK = 64 * 1024
QUEUED_CHUNKS = 256  # per direction: at most 16 MiB in flight before the sender is held back
Target = tuple[str, int]
Queue = asyncio.Queue[tuple[float, bytes]]  # (due time, data); b"" is the end


class Relay:
    """Delaying relays to `targets`, each on its own loopback port, in the running loop."""

    def __init__(self, targets: Iterable[Target], delay_s: float, bind: str = "127.0.0.1"):
        if delay_s < 0:
            raise ValueError(f"delay must be 0 or more seconds, not {delay_s}")
        self.targets, self.delay, self.bind = list(targets), delay_s, bind
        self.servers: list[asyncio.Server] = []
        self.connections: set[asyncio.Task[None]] = set()

    async def start(self) -> dict[Target, int]:
        """Listen for every target; returns the loopback port in front of each."""
        ports = {}
        for target in self.targets:
            server = await asyncio.start_server(
                lambda r, w, t=target: self._track(self._serve(t, r, w)), self.bind, 0
            )
            self.servers.append(server)
            ports[target] = server.sockets[0].getsockname()[1]
        return ports

    async def close(self) -> None:
        """Stop listening and cut every connection still open."""
        for server in self.servers:
            server.close()
        for task in list(self.connections):
            task.cancel()
        await asyncio.gather(*self.connections, return_exceptions=True)
        for server in self.servers:
            await server.wait_closed()

    def _track(self, coro: object) -> None:
        task = asyncio.ensure_future(coro)  # type: ignore[arg-type]
        self.connections.add(task)
        task.add_done_callback(self.connections.discard)

    async def _serve(
        self, target: Target, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter
    ) -> None:
        loop = asyncio.get_running_loop()
        upstream: asyncio.Future[asyncio.StreamWriter] = loop.create_future()
        client: asyncio.Future[asyncio.StreamWriter] = loop.create_future()
        client.set_result(client_w)
        to_server: Queue = asyncio.Queue(QUEUED_CHUNKS)
        to_client: Queue = asyncio.Queue(QUEUED_CHUNKS)
        # The client's bytes are stamped as they arrive, while the upstream connection waits.
        tasks = [
            asyncio.ensure_future(self._read(client_r, to_server)),
            asyncio.ensure_future(self._deliver(to_server, upstream)),
        ]
        writers = [client_w]
        try:
            await asyncio.sleep(3 * self.delay)  # the TCP handshake's 1.5 round trips
            server_r, server_w = await asyncio.open_connection(*target)
            writers.append(server_w)
            upstream.set_result(server_w)
            tasks += [
                asyncio.ensure_future(self._read(server_r, to_client)),
                asyncio.ensure_future(self._deliver(to_client, client)),
            ]
            await asyncio.gather(*tasks)
        except OSError:
            pass  # the target refused: the client sees its connection closed
        finally:
            upstream.cancel()  # no-op once set
            for task in tasks:
                task.cancel()
            for writer in writers:
                writer.close()

    async def _read(self, reader: asyncio.StreamReader, queue: Queue) -> None:
        """Stamp each chunk with its delivery time as it arrives; EOF (b"") travels too."""
        loop = asyncio.get_running_loop()
        try:
            while data := await reader.read(CHUNK):
                await queue.put((loop.time() + self.delay, data))
        except OSError:
            pass  # a reset: deliver what came before it, then the end
        await queue.put((loop.time() + self.delay, b""))

    async def _deliver(
        self, queue: Queue, destination: asyncio.Future[asyncio.StreamWriter]
    ) -> None:
        """Write each chunk when it is due, in order; pass EOF on as a half-close."""
        loop = asyncio.get_running_loop()
        writer: asyncio.StreamWriter | None = None
        while True:
            due, data = await queue.get()
            await asyncio.sleep(max(0.0, due - loop.time()))
            writer = writer or await destination
            try:
                if not data:
                    if writer.can_write_eof() and not writer.is_closing():
                        writer.write_eof()
                    return
                writer.write(data)
                await writer.drain()
            except OSError:
                writer.close()  # the far side went away: drop the rest, keep the queue moving
                while (await queue.get())[1]:
                    pass
                return


def parse_target(text: str) -> Target:
    """HOST:PORT (the host may be an IPv6 address in brackets)."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]"), int(port)


async def run(targets: list[Target], delay_s: float, lifetime_s: float) -> None:
    """Serve until the lifetime ends, SIGTERM/SIGINT, or standard input (a pipe) closes."""
    relay = Relay(targets, delay_s)
    ports = await relay.start()
    print(json.dumps({f"{h}:{p}": port for (h, p), port in ports.items()}), flush=True)
    loop = asyncio.get_running_loop()
    stop = loop.create_future()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: stop.done() or stop.set_result(None))
    if stat.S_ISFIFO(os.fstat(sys.stdin.fileno()).st_mode):
        reader = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        stdin_closed = asyncio.ensure_future(reader.read())
        stdin_closed.add_done_callback(lambda _: stop.done() or stop.set_result(None))
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(stop, lifetime_s)
    await relay.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="+", type=parse_target, metavar="HOST:PORT")
    parser.add_argument("--delay-ms", type=float, required=True, help="each direction")
    parser.add_argument("--lifetime-s", type=float, default=3600.0, help="then it stops")
    args = parser.parse_args()
    if args.delay_ms < 0 or args.lifetime_s <= 0:
        parser.error("--delay-ms must be 0 or more and --lifetime-s more than 0")
    asyncio.run(run(args.targets, args.delay_ms / 1000, args.lifetime_s))


if __name__ == "__main__":
    main()
