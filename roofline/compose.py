"""Compose conf/ into params.yaml exactly as `dvc exp run` does (DVC's own Hydra composition).

uv run python -m roofline.compose            # rewrite params.yaml from conf/
uv run python -m roofline.compose --check    # exit 1 if params.yaml differs from conf/
uv run python -m roofline.compose devices.cpu.dtypes=[float32]   # Hydra overrides
"""

import argparse
import sys
import tempfile
from pathlib import Path

from dvc.utils.hydra import compose_and_dump

from roofline.config import PARAMS_FILE
from roofline.schema import write_text_atomic


def compose(root: Path, overrides: list[str]) -> str:
    """The YAML that DVC's Hydra integration would write for these overrides."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp, "params.yaml")
        compose_and_dump(
            out, str((root / "conf").resolve()), None, "config", str(root.resolve()), overrides
        )
        return out.read_text()


def explain(err: BaseException) -> str:
    """Hydra's message and its causes: the cause names the allowed values."""
    messages = []
    while err is not None:
        messages.append(str(err).strip())
        err = err.__cause__
    return "\n".join(messages)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--check", action="store_true", help="only compare with params.yaml")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. bench.repeats=5")
    args = parser.parse_args(argv)
    try:
        text = compose(Path("."), args.overrides)
    except Exception as err:  # Hydra names the bad override or value
        sys.exit(f"error: {explain(err)}")
    if args.check:
        if not PARAMS_FILE.exists() or PARAMS_FILE.read_text() != text:
            sys.exit("params.yaml differs from conf/: run `uv run python -m roofline.compose`")
        return
    write_text_atomic(PARAMS_FILE, text)


if __name__ == "__main__":
    main()
