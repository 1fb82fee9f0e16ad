"""The several-machines rules.

Which records a machine keeps, measures again or records as pending; the keys that say what
measured them; one measurement of a device at a time; the per-device pipeline files."""
