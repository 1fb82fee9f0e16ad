"""One side of the oneDNN instruction-set knob, in a process of its own: oneDNN reads
ONEDNN_MAX_CPU_ISA once, when torch loads, so each cap needs a fresh process.

    ONEDNN_MAX_CPU_ISA=AVX512_CORE python -m roofline.measuring.capped '[SHAPE, THREADS, BENCH]'

prints {"check_error", "samples", "error"} as JSON: the bfloat16 product checked against
float64, then (for BENCH's min_seconds > 0) timed as BENCH (a BenchSettings, as a dict) says."""

import json
import sys

import torch

from roofline.device.timing import BenchSettings, HostTimer, sample
from roofline.measuring.matmul import WrongResult, prepare_matmul


def main(argv: list[str]) -> None:
    shape, threads, bench = json.loads(argv[0])
    window = BenchSettings(**bench)
    torch.set_num_threads(threads)
    out = {"check_error": None, "samples": [], "error": None}
    try:
        prepared = prepare_matmul(
            *shape,
            "bfloat16",
            "cpu",
            window,
            cache_bytes=None,
        )
    except WrongResult as err:
        out["error"] = str(err)
    else:
        out["check_error"] = prepared.check_error
        if window.min_seconds > 0:
            out["samples"] = sample(prepared.call, HostTimer(), window).samples
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
