"""Disposable real hosts on the local machine for tests, the demo and the benchmarks.

Fleet hosts are network namespaces running sshd on an overlay of a cached Debian rootfs;
full hosts are privileged Podman containers booting systemd; a local registry serves images.
Everything made is recorded in a state file first, so `down` removes it by its records.
"""
