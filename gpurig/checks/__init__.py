"""Judging a host: check(spec, state) -> [Finding] by domain (GPU, node, container, compat), the
findings' table and model, and the judge that runs plans and checks over one read."""
