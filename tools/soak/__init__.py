"""`emgas soak`: faults under load, all together, then a reconciliation that can fail."""

from emgas.tools.soak.run import SoakOptions, print_figures, run_soak

__all__ = ["SoakOptions", "print_figures", "run_soak"]
