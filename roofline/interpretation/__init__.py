"""Interpretation: measurements joined with peaks, prices and bands; rows, roofs, ceilings and the
breakdown of each gap."""
