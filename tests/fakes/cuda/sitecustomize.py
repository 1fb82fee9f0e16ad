"""Installs the CUDA stand-in (played_cuda), or the Mac's (played_mps), in every Python process whose PYTHONPATH starts
with this folder: torch.cuda is played once torch is imported, roofline.device.kinds' tensor
placement
once it is. Nothing is imported here, so processes that use neither (dvc, git hooks) pay nothing."""

import importlib.abc
import os
import sys

import played_cuda


def _runs_dvc() -> bool:
    """Whether this process is DVC itself, which runs none of the GPU path's code (its stages,
    in processes of their own, do): tracing it only slowed a played pipeline (26.0 s -> 24.2 s
    for the played MI300X's, once each, here)."""
    argv = getattr(sys, "orig_argv", [])
    return "dvc" in argv[1:3] or (bool(argv) and os.path.basename(argv[0]) == "dvc")


# .ci/run measures the GPU path's line coverage in every process that plays it (and theirs).
if os.environ.get("STANDIN_COVERAGE") and not _runs_dvc():
    os.environ["COVERAGE_PROCESS_START"] = os.environ["STANDIN_COVERAGE"]
    import coverage

    coverage.process_startup()


class AfterImport(importlib.abc.MetaPathFinder):
    """Runs a hook on a module right after it is executed, the first time it is imported."""

    def __init__(self, hooks: dict) -> None:
        self.hooks = hooks

    def find_spec(self, name, path, target=None):
        if name not in self.hooks:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        # A spec may be found without being imported (importlib.util.find_spec): the hook is
        # spent only when the module is executed.
        hooks, execute = self.hooks, spec.loader.exec_module

        def exec_module(module):
            execute(module)
            if name in hooks:
                hooks.pop(name)(module)

        spec.loader.exec_module = exec_module
        return spec


# $PLAYED_MPS plays a Mac's GPU (played_mps), else $PLAYED_MACHINE's CUDA or ROCm GPUs.
played = played_cuda
if os.environ.get("PLAYED_MPS"):
    import played_mps as played
played.begin()
sys.meta_path.insert(
    0, AfterImport({"torch": played.play_torch, "roofline.device.kinds": played.play_kinds})
)
