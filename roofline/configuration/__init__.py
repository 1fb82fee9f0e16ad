"""Configuration: the measuring settings and their bounds, the params each stage reads."""
