"""Kafka plumbing: the brokers this machine runs, topics, security, reading the log.

Below the worker runtime and the interfaces; above the settings.
"""
