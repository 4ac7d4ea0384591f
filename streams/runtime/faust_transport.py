"""Faust's aiokafka transport with a configurable fetch wait and an idempotent producer.

faust-streaming 0.15.3 hard-codes `fetch_max_wait_ms=1500` where it builds
the worker's consumer. A real broker answers a fetch as soon as data
arrives, but the embedded mock cluster holds every idle fetch for the full
wait, which would add up to 1.5 s to each query round trip. This subclass
sets the wait from our settings on the consumer before it starts.

Faust's producer is idempotent only inside its transactions; this one
always is (with acks=all, Faust's default): a retried send after a lost
acknowledgement (a broker killed, a leader moved) does not write the
event twice. The fold would skip the copy anyway; the log stays smaller.
"""

from __future__ import annotations

from typing import Any

import faust
from faust.transport.drivers import aiokafka as faust_aiokafka


class _ConsumerThread(faust_aiokafka.AIOKafkaConsumerThread):
    def _create_worker_consumer(self, transport: Any) -> Any:
        consumer = super()._create_worker_consumer(transport)
        # aiokafka reads this attribute when the consumer starts its fetcher.
        consumer._fetch_max_wait_ms = self.app.fetch_max_wait_ms
        return consumer


class _Consumer(faust_aiokafka.Consumer):
    def _new_consumer_thread(self) -> _ConsumerThread:
        return _ConsumerThread(self, loop=self.loop, beacon=self.beacon)


class _Producer(faust_aiokafka.Producer):
    def _settings_extra(self) -> Any:
        return {**super()._settings_extra(), "acks": "all", "enable_idempotence": True}


class Transport(faust_aiokafka.Transport):
    Consumer = _Consumer
    Producer = _Producer


class App(faust.App):
    """A Faust app whose consumer uses `fetch_max_wait_ms`."""

    def __init__(self, *args: Any, fetch_max_wait_ms: int, **kwargs: Any) -> None:
        self.fetch_max_wait_ms = fetch_max_wait_ms
        super().__init__(*args, **kwargs)

    def _new_transport(self) -> Transport:
        return Transport(self.conf.broker_consumer, self)
