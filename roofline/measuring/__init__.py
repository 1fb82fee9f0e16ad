"""Measuring: matmul kernels and libraries checked then timed, the benchmark, the sweep and the
knobs, as records."""
