"""The pipeline's stages, one module each, run by DVC as `python -m stages.<name>`."""

import sys
from collections.abc import Callable
from pathlib import Path

from roofline.core import errors

if sys.argv[:1] == ["-m"]:  # `python -m stages.<name>` (DVC's command), not a test's import
    errors.on_interrupt()  # before the stage imports the rest: Ctrl-C there says one line

from roofline.core import spent

KEPT = "nothing was written: the previous results are as they were"
RENDERED = "nothing was written: the previous deliverables are as they were"


def run(main: Callable[[], None], kept: str = KEPT) -> None:
    """Run a stage. Stages write their outputs atomically at the very end, all or none (and DVC
    keeps them on disk while the stage runs: persist), so a refusal, an interrupt or a failure
    leaves the previous ones whole. A config error found while measuring (a shape too big for
    this device's memory) says, as composition's do, how to undo an override that caused it."""

    def stage() -> None:
        try:
            main()
        except errors.ConfigError as err:
            from roofline.configuration.measuring_config import (
                with_override_hint,  # omegaconf: only on this path
            )

            raise with_override_hint(err) from err

    with spent.logged(name_of_stage()):
        errors.run(stage, kept)


def name_of_stage() -> str:
    """This stage as its command names it: "benchmark cpu", "report"."""
    return " ".join([Path(sys.argv[0]).stem, *sys.argv[1:]])
