"""The inventory model: loading and validation, defaults and normalised values, units, scopes, a
container's fields; and what every floor above shares: a finding's record, redaction, text
safety."""
