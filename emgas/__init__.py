"""emgas: a long-term associative memory for conversational AI on Kafka.

The installed distribution is this one package; its layers are subpackages,
each one of the repository's top-level folders (setuptools' `package-dir` in
the wheel; in a checkout, `emgas/X` is a symbolic link to `X/`):

    emgas.processors   the pure core: events, extraction, PPMI, activation, the fold's rules
    emgas.state        storage and the fold: the partition state, its records and views
    emgas.service      the step functions, retrieval, the scheduler, snapshot writing, the lexicons
    emgas.replay       reading the log back, folding, rebuilding, verifying, digests
    emgas.streams      Kafka, by role: runtime/ (the worker), interfaces/ (client, Memory API,
                       MCP, LangChain), kafka/ (brokers, topics), cli/ (the command line)

and, in a checkout of the repository only (not in the wheel or the image):

    emgas.tools        the demo, benchmarks, evaluation, load test and the test harness
"""

from emgas import _compiled

_compiled.install()  # the compiled modules a checkout built, while current (emgas/_compiled.py)
