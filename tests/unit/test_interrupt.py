"""An interrupted converge exits 128 + the signal, saying so (pyinfra's CLI exits 0 on Ctrl-C);
a real converge interrupted on a sandbox host: tests/integration/test_rental_faults.py."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

WAIT = (
    "from gpurig.remote.interrupt import install; install(); import time; "
    "print('ready', flush=True); time.sleep(60)"
)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupt_exits_non_zero_naming_it(sig: signal.Signals):
    proc = subprocess.Popen([sys.executable, "-c", WAIT], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + sig
    assert err == f"gpurig: converge interrupted ({sig.name}); run it again to finish\n"
