"""The node contracts (prolog, healthcheck, npd), up --local and the converge lock: the core,
without an SSH stack, until there is something to converge."""
