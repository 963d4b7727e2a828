"""Judging a host: check(spec, state) -> [Finding] by domain (GPU, node, container, compat), the
findings' table (their record is gpurig.spec.finding's, shared with the plans), and the judge
that runs plans and checks over one read."""
