"""The Kafka side of the memory, by role (the import contracts in pyproject.toml hold these lines):

    cli/          the `emgas` command line: parses, builds the settings once, runs a command
    runtime/      the worker: the Faust app and its agents, recovery, serving, membership, metrics
    interfaces/   reaching a running memory: the client, live administration, Memory API, MCP, LangChain
    kafka/        plumbing: the brokers this machine runs, topics, security, reading the log
    settings.py   the one settings object (`EMGAS_*`)
    http_auth.py, logs.py, errors.py   shared by all of the above

`cli` may use everything below it; `runtime` and `interfaces` never import each other.
"""
