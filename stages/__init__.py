"""The pipeline's stages, one module each, run by DVC as `python -m stages.<name>`."""

from collections.abc import Callable

from roofline import errors

KEPT = "nothing was written: the previous results are as they were"


def run(main: Callable[[], None]) -> None:
    """Run a stage. Stages write their artifacts atomically at the very end, so a refusal, an
    interrupt or a failure leaves the previous ones whole."""
    errors.run(main, KEPT)
