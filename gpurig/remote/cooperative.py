"""gevent's patch, made before anything imports paramiko or pyinfra: pyinfra's parallelism is
gevent, so sockets and threads must be cooperative first (patched later, paramiko ran on real
threads: 10 hosts took 6.5 s instead of 1.65 s)."""

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def one_plugin_scan() -> Iterator[None]:
    """gevent asks importlib.metadata for its plugins' entry points at each of its patch events
    (about 25 in patch_all), each a scan of every installed package: about 0.13 s of CPU at
    every start. One scan answers them all while patching (the same entry points)."""
    from importlib import metadata

    scan, found = metadata.entry_points, metadata.entry_points()
    metadata.entry_points = lambda **select: found.select(**select) if select else found
    try:
        yield
    finally:
        metadata.entry_points = scan


def patch() -> None:
    """Make this process cooperative for pyinfra (once; gevent ignores a second patch)."""
    from gevent import monkey

    with one_plugin_scan():
        monkey.patch_all()
