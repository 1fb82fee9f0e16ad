"""Plain functions behind the roofline pipeline's stages: arithmetic, config, hardware, timing."""
