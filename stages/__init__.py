"""The pipeline's stages, one module each, run by DVC as `python -m stages.<name>`."""

import sys
import traceback
from collections.abc import Callable

from roofline.errors import ConfigError, SchemaError

KEPT = "nothing was written: the previous results are as they were"


def run(main: Callable[[], None]) -> None:
    """Run a stage. A bad config or results file ends it with its message alone; an interrupt,
    out-of-memory or CUDA error ends it saying what happened. Stages write their artifacts
    atomically at the very end, so in every case the previous ones are left whole."""
    try:
        main()
    except (ConfigError, SchemaError) as err:
        sys.exit(f"error: {err}")
    except KeyboardInterrupt:
        sys.exit(f"interrupted; {KEPT}")
    except (MemoryError, RuntimeError) as err:  # torch's OutOfMemoryError and CUDA errors
        traceback.print_exc()
        sys.exit(f"failed: {type(err).__name__}: {err}\n{KEPT}")
