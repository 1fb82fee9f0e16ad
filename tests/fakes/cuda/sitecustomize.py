"""Installs the CUDA stand-in (played_cuda), or the Mac's (played_mps), in every Python process
whose PYTHONPATH starts with this folder: torch.cuda is played once torch is imported,
roofline.device.kinds' tensor placement once it is. Nothing else is imported here, so processes
that use neither (dvc, git hooks) pay nothing."""

import importlib.abc
import os
import sys

import played_cuda


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


class Absent(importlib.abc.MetaPathFinder):
    """Refuses the modules a bare GPU image does not have, as Python does where they are not
    installed: $PLAYED_BARE plays the image scripts/gpu-check promises to run on (torch, numpy,
    nvidia-ml-py, PyYAML and pytest, with no pytest plugins), holding every other dependency of
    the project back."""

    NOT_THERE = frozenset(
        [
            "cpuinfo",
            "psutil",
            "pandas",
            "omegaconf",
            "hydra",
            "dvc",
            "threadpoolctl",
            "tqdm",
            "matplotlib",
            "seaborn",
            "xdist",
            "pytest_cov",
            "coverage",
            "sky",
        ]
    )

    def find_spec(self, name, path, target=None):
        if name.partition(".")[0] in self.NOT_THERE:
            raise ModuleNotFoundError(f"No module named '{name}'", name=name)
        return None


if os.environ.get("PLAYED_BARE"):
    sys.meta_path.insert(0, Absent())
