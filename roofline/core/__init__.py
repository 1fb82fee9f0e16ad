"""What every part shares: dtypes, the records' types, arithmetic, errors, files."""
