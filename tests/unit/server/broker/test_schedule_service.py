"""Delay levels, timer messages and send-back on a real store in a temporary directory, driven by
a fake clock (store timestamps and the reactor's timers read the same clock): the put hook, the
per-level schedule service with its delayOffset.json, the timer store with its checkpoint across a
restart, and CONSUMER_SEND_MSG_BACK's retry / DLQ decisions."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from twisted.internet import defer
from twisted.internet.task import Clock

from rmqwire.codec import RemotingCommand, ResponseCode
from rmqwire.codec.commands.consumer import (
    ConsumerSendMsgBack,
    ConsumerSendMsgBackRequestHeader,
)
from rmqwire.codec.message import MessageExt, decode_message
from rmqwire.remoting.dispatcher import RequestContext
from rmqwire.server.broker import Broker, BrokerSettings
from rmqwire.server.broker.config import StoreExtras
from rmqwire.server.broker.schedule import (
    ScheduleHook,
    ScheduleMessageService,
    TimerMessageStore,
)
from rmqwire.server.store import (
    DefaultMessageStore,
    MessageStoreConfig,
    PutMessageStatus,
)

T0 = 1_700_000_000_000
SCHEDULE = "SCHEDULE_TOPIC_XXXX"
TIMER = "rmq_sys_wheel_timer"


def sync_run(fn: Callable[[], None]) -> Any:
    fn()
    return defer.succeed(None)


class FakeTime:
    def __init__(self) -> None:
        self.reactor = Clock()
        self.reactor.advance(T0 / 1000)

    def ms(self) -> int:
        return round(self.reactor.seconds() * 1000)

    def advance(self, seconds: float, step: float = 0.05) -> None:
        end = self.reactor.seconds() + seconds
        while self.reactor.seconds() < end - 1e-9:
            self.reactor.advance(min(step, end - self.reactor.seconds()))


@pytest.fixture
def t() -> FakeTime:
    return FakeTime()


def open_store(root: Path, t: FakeTime, levels: str = "1s 2s 3s") -> DefaultMessageStore:
    cfg = MessageStoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=1 << 20,
                             mapped_file_size_consume_queue=1000 * 20, message_delay_level=levels)
    store = DefaultMessageStore(cfg, now_ms=t.ms)
    store.load()
    store.start()
    return store


@pytest.fixture
def stores(tmp_path: Path, t: FakeTime) -> Iterator[Callable[[], DefaultMessageStore]]:
    opened: list[DefaultMessageStore] = []

    def make() -> DefaultMessageStore:
        for s in opened:
            s.shutdown()
        store = open_store(tmp_path / "store", t)
        store.add_put_hook(ScheduleHook(lambda: max(store.delay_levels), StoreExtras(), clock=t.ms))
        opened.append(store)
        return store

    yield make
    for s in opened:
        s.shutdown()


def msg(topic: str = "T", queue_id: int = 1, **props: str) -> MessageExt:
    return MessageExt(topic=topic, body=b"b", queue_id=queue_id, properties={"TAGS": "A", **props},
                      born_host=("10.0.0.1", 5000), store_host=("127.0.0.1", 10911), born_timestamp=T0)


def read_all(store: DefaultMessageStore, topic: str, queue_id: int) -> list[MessageExt]:
    r = store.get_message("g", topic, queue_id, 0, 100)
    return [decode_message(b) for b in r.message_buffers] if r is not None else []


# --------------------------------------------------------------------------- delay levels


def test_delay_level_parks_in_schedule_topic_and_is_delivered_when_due(stores: Any, t: FakeTime,
                                                                         tmp_path: Path) -> None:
    store = stores()
    m = msg(DELAY="2")
    assert store.put_message(m).status is PutMessageStatus.PUT_OK
    assert (m.topic, m.queue_id) == (SCHEDULE, 1)
    unit = store.find_consume_queue(SCHEDULE, 1).get(0)
    assert unit.tags_code == m.store_timestamp + 2000
    (parked,) = read_all(store, SCHEDULE, 1)
    assert parked.properties["REAL_TOPIC"] == "T" and parked.properties["REAL_QID"] == "1"

    puts: list[tuple[str, int, int]] = []
    service = ScheduleMessageService(t.reactor, store, tmp_path / "delayOffset.json", clock=t.ms,
                                     run_blocking=sync_run, on_put=lambda *a: puts.append(a))
    service.load()
    service.start()
    t.advance(1.9)
    assert read_all(store, "T", 1) == []
    t.advance(0.3)
    (got,) = read_all(store, "T", 1)
    assert got.store_timestamp >= m.store_timestamp + 2000
    # Java fixes the record's properties before clearing DELAY: all three stay.
    assert got.properties["DELAY"] == "2" and got.properties["REAL_TOPIC"] == "T"
    assert got.body == b"b" and got.born_timestamp == T0 and got.reconsume_times == 0
    assert service.offset_table == {2: 1}
    assert [p[:2] for p in puts] == [("T", 1)]
    assert service.running_stats()["scheduleMessageOffset_2"] == "1,1"
    service.stop()
    text = (tmp_path / "delayOffset.json").read_text()
    assert '"offsetTable":{2:1\n\t}' in text and text.startswith('{\n\t"dataVersion":{')


def test_delay_level_above_the_table_is_clamped(stores: Any) -> None:
    store = stores()
    m = msg(DELAY="40", TIMER_DELAY_SEC="5")
    store.put_message(m)
    assert (m.topic, m.queue_id) == (SCHEDULE, 2)
    assert m.properties["DELAY"] == "3" and "TIMER_DELAY_SEC" not in m.properties


def test_schedule_progress_survives_restart_and_is_corrected(stores: Any, t: FakeTime, tmp_path: Path) -> None:
    store = stores()
    for _ in range(2):
        store.put_message(msg(DELAY="1"))
    service = ScheduleMessageService(t.reactor, store, tmp_path / "delayOffset.json", clock=t.ms,
                                     run_blocking=sync_run)
    service.load()
    service.start()
    t.advance(1.2)
    assert len(read_all(store, "T", 1)) == 2
    store.put_message(msg(DELAY="3"))
    service.stop()

    store = stores()
    again = ScheduleMessageService(t.reactor, store, tmp_path / "delayOffset.json", clock=t.ms,
                                   run_blocking=sync_run)
    again.load()
    assert again.offset_table[1] == 2
    again.start()
    t.advance(3.5)
    assert len(read_all(store, "T", 1)) == 3  # the two before the restart are not repeated
    again.stop()

    (tmp_path / "delayOffset.json").write_text('{"offsetTable":{1:99,3:-5}}')
    third = ScheduleMessageService(t.reactor, stores(), tmp_path / "delayOffset.json", clock=t.ms)
    third.load()
    assert third.offset_table == {1: 2, 3: 0}


def test_delay_skips_records_without_real_topic_and_half_topic(stores: Any, t: FakeTime) -> None:
    store = stores()
    bad = msg(topic=SCHEDULE, queue_id=0, DELAY="1")  # sent straight to the schedule topic
    store.put_message(bad, hooks=False)
    store.put_message(msg(topic="RMQ_SYS_TRANS_HALF_TOPIC", queue_id=0, DELAY="1"))
    store.put_message(msg(DELAY="1"))
    service = ScheduleMessageService(t.reactor, store, None, clock=t.ms)
    service.start()
    t.advance(1.5)
    assert len(read_all(store, "T", 1)) == 1
    assert read_all(store, "RMQ_SYS_TRANS_HALF_TOPIC", 0) == []
    assert service.offset_table[1] == 3
    service.stop()


# --------------------------------------------------------------------------- timer messages


def test_timer_hook_rounds_down_and_refuses_what_java_refuses(t: FakeTime) -> None:
    hook = ScheduleHook(lambda: 18, StoreExtras(), clock=t.ms)
    m = msg(TIMER_DELAY_SEC="3")
    assert hook(m) is None
    assert (m.topic, m.queue_id) == (TIMER, 0)
    assert m.properties["TIMER_OUT_MS"] == str(T0 + 3000 - 1000)  # an exact slot goes one back
    m = msg(TIMER_DELAY_MS="2500")
    hook(m)
    assert m.properties["TIMER_OUT_MS"] == str(T0 + 2000)
    past = msg(TIMER_DELIVER_MS=str(T0 - 5))
    assert hook(past) is None and past.topic == "T"
    assert hook(msg(TIMER_DELIVER_MS="soon")).status is PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL
    assert hook(msg(TIMER_DELAY_SEC=str(4 * 86400))).status is PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL
    off = ScheduleHook(lambda: 18, StoreExtras(timer_wheel_enable=False), clock=t.ms)
    assert off(msg(TIMER_DELAY_SEC="3")).status is PutMessageStatus.WHEEL_TIMER_NOT_ENABLE
    assert off(msg()) is None
    half = msg(TIMER_DELAY_SEC="3", DELAY="2")
    half.sys_flag = 0x4
    assert hook(half) is None and half.topic == "T"


def test_timer_delivers_no_earlier_than_asked_and_survives_restart(stores: Any, t: FakeTime,
                                                                  tmp_path: Path) -> None:
    store = stores()
    t.advance(0.3)
    for delay_ms in (1700, 4200):
        store.put_message(msg(TIMER_DELAY_MS=str(delay_ms)))
    asked = [t.ms() + 1700, t.ms() + 4200]
    check = tmp_path / "timer.json"
    timer = TimerMessageStore(t.reactor, store, check, clock=t.ms, run_blocking=sync_run)
    timer.load()
    timer.start()
    t.advance(1.2)
    assert read_all(store, "T", 1) == []
    t.advance(1.0)
    (first,) = read_all(store, "T", 1)
    assert first.store_timestamp >= asked[0]
    props = first.properties
    assert props["REAL_TOPIC"] == "T" and props["TIMER_OUT_MS"] and int(props["TIMER_DEQUEUE_MS"]) >= asked[0]
    assert "TIMER_ENQUEUE_MS" in props
    timer.stop()  # the broker stops with the second one pending

    store = stores()
    t.advance(0.5)
    timer = TimerMessageStore(t.reactor, store, check, clock=t.ms, run_blocking=sync_run)
    timer.load()
    timer.start()
    t.advance(0.5)
    assert len(read_all(store, "T", 1)) == 1  # the first is not delivered again
    t.advance(3.0)
    got = read_all(store, "T", 1)
    assert len(got) == 2 and got[1].store_timestamp >= asked[1]
    timer.stop()


def test_timer_read_behind_counts_whole_seconds_since_the_first_slot_not_read(stores: Any, t: FakeTime) -> None:
    store = stores()
    timer = TimerMessageStore(t.reactor, store, None, clock=t.ms, run_blocking=sync_run)
    timer.load()
    assert timer.read_behind() == 0  # nothing read yet
    timer.start()
    t.advance(2.5)
    assert timer.read_behind() == 0  # the passes keep up
    timer.stop()
    t.advance(3.0)  # no pass runs: the slot read last is 3.x s old
    assert timer.read_behind() == 3


# --------------------------------------------------------------------------- send-back


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    settings = BrokerSettings.from_properties({
        "brokerName": "b", "brokerIP1": "127.0.0.1", "listenPort": "10911",
        "storePathRootDir": str(tmp_path / "b"), "mappedFileSizeCommitLog": str(1 << 20),
        "mappedFileSizeConsumeQueue": str(1000 * 20),
    })
    b = Broker(Clock(), settings)
    b.store.load()
    b.topic_config_manager.load()
    b.store.start()
    try:
        yield b
    finally:
        b.store.shutdown()


def send_back(b: Broker, offset: int, *, delay: int = 0, max_times: int | None = None) -> Any:
    header = ConsumerSendMsgBackRequestHeader(offset=offset, group="CG", delay_level=delay, origin_topic="T",
                                              max_reconsume_times=max_times)
    req: RemotingCommand = ConsumerSendMsgBack.request(header)
    return b.send_processor.consumer_send_msg_back(header, None, RequestContext(peer="1.2.3.4:5", request=req))


def test_send_back_goes_to_retry_with_growing_delay_then_to_dlq(broker: Broker) -> None:
    store = broker.store
    first = msg(UNIQ_KEY="U1")
    store.put_message(first)
    r = send_back(broker, first.commit_log_offset, max_times=2)
    assert r.code == ResponseCode.SUCCESS
    (parked,) = read_all(store, SCHEDULE, 2)  # DELAY 3 + 0
    p = parked.properties
    assert p["REAL_TOPIC"] == "%RETRY%CG" and p["RETRY_TOPIC"] == "T" and p["WAIT"] == "false"
    assert p["ORIGIN_MESSAGE_ID"] == first.offset_msg_id and parked.reconsume_times == 1
    cfg = broker.topic_config_manager.select("%RETRY%CG")
    assert cfg is not None and cfg.perm == 6 and cfg.read_queue_nums == 1

    r = send_back(broker, parked.commit_log_offset, max_times=2)
    (second,) = read_all(store, SCHEDULE, 3)  # DELAY 3 + 1
    assert second.reconsume_times == 2 and second.properties["ORIGIN_MESSAGE_ID"] == first.offset_msg_id
    assert second.properties["RETRY_TOPIC"] == "T"

    assert send_back(broker, second.commit_log_offset, max_times=2).code == ResponseCode.SUCCESS
    (dead,) = read_all(store, "%DLQ%CG", 0)
    assert dead.reconsume_times == 3 and dead.properties["DELAY"] == "0" and dead.body == b"b"
    dlq = broker.topic_config_manager.select("%DLQ%CG")
    assert dlq is not None and dlq.perm == 6 and dlq.write_queue_nums == 1

    assert send_back(broker, first.commit_log_offset, delay=-1).code == ResponseCode.SUCCESS
    assert len(read_all(store, "%DLQ%CG", 0)) == 2  # a negative level goes straight to the DLQ


def test_send_back_refusals(broker: Broker) -> None:
    r = send_back(broker, 123_456)
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "look message by offset failed, 123456")
    group = broker.subscription_group_manager.find("CG")
    group.retry_queue_nums = 0
    m = msg()
    broker.store.put_message(m)
    assert send_back(broker, m.commit_log_offset).code == ResponseCode.SUCCESS
    assert read_all(broker.store, SCHEDULE, 2) == []  # dropped, as Java
    group.retry_queue_nums = 1
    broker.settings.broker.broker_permission = 4
    assert send_back(broker, m.commit_log_offset).code == ResponseCode.NO_PERMISSION
