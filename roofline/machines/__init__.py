"""The several-machines rules: which records a machine keeps, re-measures or pends, the keys that
say what measured them, holding a device's records, the per-device pipeline files."""
