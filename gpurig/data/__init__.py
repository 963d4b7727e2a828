"""The data tables (compat, checks, node modes, ...) with their sources, and their loader."""
