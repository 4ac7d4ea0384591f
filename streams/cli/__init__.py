"""The `emgas` command line (`main`), built from command descriptions (`command`)."""

import os

# One BLAS thread unless the user chose a number, set before anything imports
# numpy (OpenBLAS reads it as it loads). The one matrix product a worker runs,
# a query's words against its graph's concept vectors (semantic seeds: 3 × 384
# by 384 × 3,000), takes 0.4 ms on one thread; on OpenBLAS's default of one a
# core, 0.2 ms on an idle machine but 15-20 ms whenever the other core is busy
# (the broker, a fold, a client), its threads waiting for each other.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
