"""The ways to reach a running memory: the Python client, live administration, the Memory API, MCP, LangChain."""
