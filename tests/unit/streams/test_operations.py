"""Settings that reach Kafka clients, the effective configuration, JSON logs, stats requests."""

import json
import logging
import subprocess
import sys

import pytest
from pydantic import ValidationError

from emgas.processors.codec import decode_request
from emgas.processors.events import StatsQuery
from emgas.streams.logs import JsonFormatter, logging_config
from emgas.streams.settings import KafkaSecurity


def test_plaintext_adds_no_client_options():
    assert KafkaSecurity().aiokafka_options() == {} and KafkaSecurity().faust_credentials() is None


def test_sasl_ssl_options_reach_aiokafka():
    security = KafkaSecurity(
        security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512", sasl_username="alice", sasl_password="s3cret"
    )
    options = security.aiokafka_options()
    assert options["security_protocol"] == "SASL_SSL" and options["sasl_mechanism"] == "SCRAM-SHA-512"
    assert options["sasl_plain_username"] == "alice" and options["sasl_plain_password"] == "s3cret"
    assert options["ssl_context"] is not None
    assert security.faust_credentials().mechanism.value == "SCRAM-SHA-512"


def test_sasl_without_credentials_is_refused():
    with pytest.raises(ValidationError, match="needs sasl_username"):
        KafkaSecurity(security_protocol="SASL_PLAINTEXT")


def test_emgas_config_masks_secrets(tmp_path):
    env = {"EMGAS_HOME": str(tmp_path), "EMGAS_KAFKA__SECURITY_PROTOCOL": "SASL_PLAINTEXT",
           "EMGAS_KAFKA__SASL_USERNAME": "alice", "EMGAS_KAFKA__SASL_PASSWORD": "hunter2", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-m", "emgas", "config"], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    config = json.loads(out.stdout)
    assert config["kafka"]["sasl_username"] == "alice" and "hunter2" not in out.stdout
    assert config["graph"]["decay"]["half_life_s"] > 0 and config["partitions"] == 8


def test_json_log_lines():
    record = logging.LogRecord("emgas.test", logging.WARNING, __file__, 1, 'say "%s"', ("hi",), None)
    line = json.loads(JsonFormatter().format(record))
    assert line["level"] == "WARNING" and line["logger"] == "emgas.test" and line["message"] == 'say "hi"'
    assert logging_config("text", "INFO") is None and logging_config("json", "INFO")["root"]["level"] == "INFO"


def test_stats_queries_decode():
    query = decode_request(b'{"type":"stats_query","request_id":"s1","graph_id":"g","top":3}')
    assert isinstance(query, StatsQuery) and query.top == 3
