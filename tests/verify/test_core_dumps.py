"""Checks of a converged host from its own side (testinfra). Run against your hosts:

    pytest tests/verify --hosts=ssh://a100-1 --ssh-config ~/.ssh/config

Host key checking follows the ssh config (use StrictHostKeyChecking yes).
"""

import pytest

from gpurig.plans.core_dumps import MANAGED_FILES


@pytest.fixture(autouse=True)
def _core_dumps_disabled(spec):
    if spec.get("core_dumps", "disabled") != "disabled":
        pytest.skip("this host declares core_dumps: enabled")


def test_core_dump_limits_are_written(host):
    for path, content in MANAGED_FILES.items():
        f = host.file(path)
        assert f.exists, path
        assert f.content_string == content, path
        assert f.mode == 0o644, path


def test_fresh_login_shell_has_no_core_dumps(host):
    out = host.check_output("bash -lc 'ulimit -S -c'")
    assert out.strip() == "0"
