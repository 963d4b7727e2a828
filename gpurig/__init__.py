"""gpurig: declarative provisioning and drift checking for GPU hosts."""

__version__ = "0.1.0"
