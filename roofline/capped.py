"""One side of the oneDNN instruction-set knob, in a process of its own: oneDNN reads
ONEDNN_MAX_CPU_ISA once, when torch loads, so each cap needs a fresh process.

    ONEDNN_MAX_CPU_ISA=AVX512_CORE python -m roofline.capped '[SHAPE, SETTINGS]' SECONDS WARMUP

prints {"check_error", "samples", "error"} as JSON: the bfloat16 product checked against
float64, then (for SECONDS > 0) timed after WARMUP calls."""

import json
import sys

import torch

from roofline.kernels import WrongResult, prepare_matmul
from roofline.timing import HostTimer, sample


def main(argv: list[str]) -> None:
    (shape, settings), seconds, warmup = json.loads(argv[0]), float(argv[1]), int(argv[2])
    torch.set_num_threads(settings["threads"])
    out = {"check_error": None, "samples": [], "error": None}
    try:
        prepared = prepare_matmul(
            *shape,
            "bfloat16",
            "cpu",
            seed=settings["seed"],
            check_rows=settings["check_rows"],
            cache_bytes=None,
        )
    except WrongResult as err:
        out["error"] = str(err)
    else:
        out["check_error"] = prepared.check_error
        if seconds > 0:
            out["samples"] = sample(prepared.call, HostTimer(), warmup, 1, seconds).samples
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
