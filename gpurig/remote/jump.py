"""Reaching a host through its login node (`ssh.jump`), both hops made in this process.

gpurig logs in to the login node with paramiko, accepting nothing but its pinned host key,
then opens a `direct-tcpip` channel there to the host's address and port, and pyinfra's own
SSH connector runs the host's connection over that channel, checking the host's key as it
checks any host's. No ProxyCommand: no shell line is ever built from inventory strings.
(pyinfra 3.10 follows an ssh_config ProxyJump, but it checks the hop's key against
~/.ssh/known_hosts under its "ask" policy, an input() prompt, and never closes the hop.)

Hosts behind one login node share one login per process, counted and closed when the last of
them disconnects: an sshd drops concurrent unauthenticated connections beyond its MaxStartups
(10:30:100 by default), which a fleet's parallel connects through one login node would
exceed, and a cluster's admins see one login, not one per node.

Registered as pyinfra's `gpurig_jump` connector (pyproject.toml's entry point): gpurig names
such a host `@gpurig_jump/NAME` for pyinfra (gpurig.remote.pyinfra_inventory), which calls it NAME.
pyinfra loads every registered connector on every run, so this module imports nothing heavy.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, ClassVar

import paramiko
from gevent.lock import Semaphore
from pyinfra.api.exceptions import ConnectError
from pyinfra.connectors.base import DataMeta
from pyinfra.connectors.ssh import ConnectorData, SSHConnector, connector_data_meta
from typing_extensions import override

from gpurig.spec.hostkeys import jump_key_refusal

LoginKey = tuple[tuple[str, Any], ...]


def endpoint(address: str, port: int) -> str:
    """`address:port` as messages name a hop (`[address]:port` for IPv6)."""
    bare = ":" in address and not address.startswith("[")
    return f"[{address}]:{port}" if bare else f"{address}:{port}"


def _pinned_key(host_key: str) -> paramiko.PKey:
    key_type, _, blob = host_key.partition(" ")
    return paramiko.PKey.from_type_string(key_type, base64.b64decode(blob))


def _login(jump: Mapping[str, Any], timeout: float) -> paramiko.SSHClient:
    """A connection to the login node whose host key is the pinned one, or ConnectError
    naming the hop. `jump`: address, port, user, key (a path), host_key."""
    where = endpoint(jump["address"], jump["port"])
    client = paramiko.SSHClient()
    # Under the name paramiko looks it up by, so it also asks the server for that key type.
    name = jump["address"] if jump["port"] == 22 else f"[{jump['address']}]:{jump['port']}"
    try:
        pinned = _pinned_key(jump["host_key"])
    except (paramiko.SSHException, ValueError) as exc:
        raise ConnectError(f"SSH error (login node {where}: ssh.jump.host_key: {exc})") from None
    client.get_host_keys().add(name, pinned.get_name(), pinned)
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    key = jump.get("key")
    try:
        client.connect(
            jump["address"],
            port=jump["port"],
            username=jump.get("user"),
            key_filename=key,
            allow_agent=key is None,  # as pyinfra does for a host without ssh.key
            look_for_keys=key is None,
            timeout=timeout,
            banner_timeout=timeout,
            auth_timeout=timeout,
        )
    except paramiko.BadHostKeyException:
        client.close()
        raise ConnectError(f"SSH host key error ({jump_key_refusal(where)})") from None
    except paramiko.AuthenticationException as exc:
        client.close()
        user = jump.get("user") or "(local user)"
        raise ConnectError(
            f"Authentication error (login node {where}, user={user}, key={key}: {exc})"
        ) from None
    except (OSError, EOFError, paramiko.SSHException) as exc:
        client.close()
        why = exc or type(exc).__name__
        raise ConnectError(f"Could not connect (login node {where}: {why})") from None
    return client


@dataclass
class _Login:
    """One login node's connection and the hosts using it."""

    lock: Semaphore = field(default_factory=Semaphore)
    client: paramiko.SSHClient | None = None
    users: int = 0
    refused: str | None = None  # a changed host key: no retry can fix it in this process


class Logins:
    """Connections to login nodes, one per distinct `ssh.jump`, shared by the hosts behind
    it; opened by the first host that needs it, closed when the last one lets go."""

    def __init__(self) -> None:
        self._logins: dict[LoginKey, _Login] = {}

    def acquire(self, jump: Mapping[str, Any], timeout: float) -> LoginKey:
        """Hold the login node's connection (made now if needed); ConnectError if it cannot."""
        key = tuple(sorted(jump.items()))
        login = self._logins.setdefault(key, _Login())
        with login.lock:  # hosts that arrive while it is being made wait for it
            if login.refused:
                raise ConnectError(login.refused)
            transport = login.client.get_transport() if login.client else None
            if transport is None or not transport.is_active():
                if login.client is not None:
                    login.client.close()  # the login node went away; its hosts fail alone
                try:
                    login.client = _login(jump, timeout)
                except ConnectError as exc:
                    if str(exc).startswith("SSH host key error"):
                        login.refused = str(exc)
                    raise
            login.users += 1
        return key

    def open(self, key: LoginKey, address: str, port: int, timeout: float) -> paramiko.Channel:
        """A channel from the login node to address:port; ConnectError naming both ends."""
        login, jump = self._logins[key], dict(key)
        where = endpoint(jump["address"], jump["port"])
        transport = login.client.get_transport() if login.client else None
        if transport is None:
            raise ConnectError(f"Could not connect (login node {where}: connection closed)")
        try:
            return transport.open_channel(
                "direct-tcpip", (address, port), ("127.0.0.1", 0), timeout=timeout
            )
        except (OSError, EOFError, paramiko.SSHException) as exc:
            raise ConnectError(
                f"Could not connect (login node {where} cannot reach "
                f"{endpoint(address, port)}: {exc or type(exc).__name__})"
            ) from None

    def release(self, key: LoginKey) -> None:
        """Let go of the login node's connection; the last host to do so closes it."""
        login = self._logins[key]
        login.users -= 1
        if login.users == 0 and login.client is not None:
            login.client.close()
            login.client = None

    def open_count(self) -> int:
        """Login node connections open now (what a test of the sharing counts)."""
        return sum(1 for login in self._logins.values() if login.client is not None)

    @contextmanager
    def channel(
        self, jump: Mapping[str, Any], address: str, port: int, timeout: float
    ) -> Iterator[paramiko.Channel]:
        """A channel to address:port through the login node, for one short exchange."""
        key = self.acquire(jump, timeout)
        try:
            chan = self.open(key, address, port, timeout)
            try:
                yield chan
            finally:
                chan.close()
        finally:
            self.release(key)


LOGINS = Logins()


class JumpConnectorData(ConnectorData):
    gpurig_jump: dict


class JumpConnector(SSHConnector):
    """pyinfra's SSH connector, its socket a channel through the login node (see above)."""

    data_cls = JumpConnectorData
    data_meta: ClassVar[dict[str, DataMeta]] = {
        **connector_data_meta,
        "gpurig_jump": DataMeta("The login node: address, port, user, key, host_key"),
    }

    _login: LoginKey | None = None
    _channel: paramiko.Channel | None = None

    @override
    @staticmethod
    def make_names_data(name):  # type: ignore[no-untyped-def]
        yield name, {}, []

    @override
    def make_paramiko_kwargs(self) -> dict[str, Any]:
        kwargs = super().make_paramiko_kwargs()
        extra = kwargs.get("_pyinfra_ssh_paramiko_connect_kwargs") or {}
        kwargs["_pyinfra_ssh_paramiko_connect_kwargs"] = {**extra, "sock": self._channel}
        return kwargs

    @override
    def _connect(self) -> None:
        self._close()  # a retry starts from a new channel
        timeout = (self.data["ssh_paramiko_connect_kwargs"] or {}).get(
            "timeout", self.state.config.CONNECT_TIMEOUT
        )
        self._login = LOGINS.acquire(self.data["gpurig_jump"], timeout)
        try:
            address = self.data["ssh_hostname"] or self.host.name
            port = int(self.data["ssh_port"] or 22)
            self._channel = LOGINS.open(self._login, address, port, timeout)
            super()._connect()
        except BaseException:
            self._close()
            raise

    @override
    def disconnect(self) -> None:
        super().disconnect()
        self._close()

    def _close(self) -> None:
        """The host's connection, its channel, then this host's hold on the login node."""
        if self.client is not None:
            with suppress(Exception):
                self.client.close()
            self.client = None
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        if self._login is not None:
            LOGINS.release(self._login)
            self._login = None
