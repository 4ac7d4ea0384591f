"""Tools around the product: the demo, benchmarks, the retrieval evaluation and its
baselines, the load test, the simulation, the in-process log and the worker harness
the tests share. The product (processors, state, replay, streams) never imports them;
the CLI finds their commands in `tools.commands`."""
