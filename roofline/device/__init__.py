"""The device seam: what a device is (probed), where its tensors live and how a call on it is timed,
the libraries a matmul runs through, its telemetry, a CPU's own ceilings."""
