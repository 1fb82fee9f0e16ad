"""Registers the config schema in Hydra's ConfigStore.

Hydra imports every module under `hydra_plugins` on start-up, and so does DVC's own Hydra
composition (`dvc exp run -S ...`): a bad override is then rejected before params.yaml is
written."""

from hydra.core.config_store import ConfigStore

from roofline.interpretation.lab_config import LabConfig

ConfigStore.instance().store(name="roofline_schema", node=LabConfig)
