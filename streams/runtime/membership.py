"""A worker that never sits outside its consumer group.

aiokafka hands some group errors to the application instead of handling
them: the coordinator stores the error and waits, with no heartbeat and
no rejoin, until the application's next `getmany` takes it
(`GroupCoordinator._push_error_to_user`). Faust reads records from the
fetcher directly and never takes it, so such a worker stays out of the
group for good while its partitions wait for a session timeout and then
move. The embedded broker produces one such error by a race: a follower
whose SyncGroup reaches it after the leader's gets INVALID_REQUEST (a real
broker answers it with the assignment). Worse, while the error waits the
fetcher's wait for an assignment raises it, which crashes a worker that
holds partitions.

So, whatever the broker does: a SyncGroup refused with INVALID_REQUEST is
answered as a rebalance in progress, a rejoin at once (a patch of aiokafka:
`streams.runtime.patches.guard_sync_groups`); any other error the coordinator holds for the application is taken, so
it goes on; and a member that has had no assignment at all (not even an
empty one) for longer than three session timeouts asks to rejoin
(`GroupWatch`; a first join on a busy broker legitimately takes a few
seconds, so one session timeout would interrupt joins that were going well).
Each is logged and counted (`emgas_group_rejoins_total{reason}`).

The checks run on the consumer's own thread and event loop (Faust runs
aiokafka there), reached with `call_soon_threadsafe` from a daemon thread.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable

log = logging.getLogger(__name__)
CHECK_EVERY_S = 0.5
UNASSIGNED_SESSIONS = 3  # session timeouts without any assignment before a member asks to rejoin


class GroupWatch:
    """Takes the errors aiokafka's coordinator waits on, and rejoins a
    member left without an assignment (`check` on the consumer's loop)."""

    def __init__(self, group: str, session_timeout_s: float, count: Callable[[str], None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.group = group
        self.session_timeout_s = session_timeout_s
        self.count = count
        self.clock = clock
        self._unassigned_since: float | None = None

    def check(self, consumer: Any) -> None:
        """One look at an `AIOKafkaConsumer` (on its own event loop)."""
        coordinator = getattr(consumer, "_coordinator", None)
        if coordinator is None or getattr(coordinator, "_closing", None) is None or coordinator._closing.done():
            return
        if coordinator._error_consumed_fut is not None and coordinator._pending_exception is not None:
            try:
                coordinator.check_errors()  # raises the stored error, and lets the coordinator go on
            except Exception as exc:  # noqa: BLE001 - any error it held: logged and counted, then rejoin
                log.warning("consumer group %s: the coordinator held %r for the application; taken, rejoining",
                            self.group, exc)
                self.count("held_error")
            coordinator.request_rejoin()
            self._unassigned_since = None
            return
        self._check_assignment(consumer, coordinator)

    def _check_assignment(self, consumer: Any, coordinator: Any) -> None:
        subscription = consumer._subscription.subscription
        if subscription is None or subscription.assignment is not None:
            self._unassigned_since = None
            return
        now = self.clock()
        if self._unassigned_since is None:
            self._unassigned_since = now
        elif now - self._unassigned_since > UNASSIGNED_SESSIONS * self.session_timeout_s:
            log.warning("consumer group %s: no assignment for %.1f s (more than three session timeouts); rejoining",
                        self.group, now - self._unassigned_since)
            self.count("no_assignment")
            coordinator.request_rejoin()
            self._unassigned_since = now


def watch_group(app: Any, watch: GroupWatch) -> threading.Thread:
    """Run `watch.check` on the Faust consumer's thread every CHECK_EVERY_S.

    Driven from a daemon thread of its own, not a Faust timer: Faust starts
    its timers (and its web server) only once the first assignment has come,
    and a worker outside its group never gets one."""

    def tick() -> None:
        while True:
            time.sleep(CHECK_EVERY_S)
            thread = getattr(app._consumer, "_thread", None)  # never creates the consumer
            consumer = getattr(thread, "_consumer", None)
            loop = getattr(thread, "thread_loop", None)
            if consumer is None or loop is None or loop.is_closed():
                continue
            try:
                loop.call_soon_threadsafe(watch.check, consumer)
            except RuntimeError:  # the loop closed between the check and the call: the worker is stopping
                continue

    watcher = threading.Thread(target=tick, name="emgas-group-watch", daemon=True)
    watcher.start()
    return watcher
