"""Rendering: the roofline plot and the report pages."""
