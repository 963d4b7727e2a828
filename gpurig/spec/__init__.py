"""The inventory model: loading and validation, defaults and normalised values, units, scopes, a
container's fields."""
