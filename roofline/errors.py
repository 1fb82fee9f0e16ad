"""Errors that end a stage with their message alone: each names the value at fault and what
is allowed."""


class ConfigError(ValueError):
    """A config value that is not allowed."""


class SchemaError(ValueError):
    """A results file that does not follow the results schema."""
