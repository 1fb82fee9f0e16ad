"""The pipeline's stages, one module each, run by DVC as `python -m stages.<name>`."""

import sys
from collections.abc import Callable

from roofline.errors import ConfigError, SchemaError


def run(main: Callable[[], None]) -> None:
    """Run a stage; a bad config or a bad results file ends it with its message, no traceback."""
    try:
        main()
    except (ConfigError, SchemaError) as err:
        sys.exit(f"error: {err}")
