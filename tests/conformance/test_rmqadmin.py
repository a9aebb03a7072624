"""rmqadmin against the official mqadmin, on the same official cluster in the same state.

For every command both tools run against the session's 5.3.3 NameServer + Broker (a topic with
messages, a running Java push consumer); their stdout must be equal after normalising only what
changes from one run to the next (times, TPS and other rates, client ids, the millisecond a
command ran). Mutating commands run once per tool on twin resources (``...A`` by mqadmin,
``...B`` by rmqadmin) and must print the same text with the names swapped; what rmqadmin changed
is then read back with mqadmin, and by the Java consumer where it matters. Bad input must give one
line on stderr and a non-zero exit; ``--json`` must parse with its documented fields. A second
class runs the commands 4.9.7's mqadmin shares with 5.3.3 against the 4.9.7 reference.

rmqadmin runs as ``python -m rmqwire admin`` in a subprocess (the real process start, as a user
runs it), with the working directory in tmp_path (consumerStatus writes files there).
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tools.reference.mqadmin import MqadminResult, run_mqadmin

pytestmark = pytest.mark.conformance

RMQADMIN_TIMEOUT = 60.0
ROOT = Path(__file__).resolve().parents[2]


# ---- running both tools ------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    args: tuple[str, ...]
    stdout: str
    stderr: str
    returncode: int
    elapsed_s: float


def rmqadmin(namesrv: str | None, *args: str, cwd: Path | None = None,
             timeout: float = RMQADMIN_TIMEOUT, env: dict[str, str] | None = None) -> Run:
    argv = [sys.executable, "-m", "rmqwire", "admin", *args]
    if namesrv is not None:
        argv += ["-n", namesrv]
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    environment.pop("NAMESRV_ADDR", None)  # only -n, or what the test gives, names a NameServer
    environment.update(env or {})
    t0 = time.monotonic()
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=cwd or ROOT,
                       env=environment)
    return Run(tuple(args), p.stdout, p.stderr, p.returncode, time.monotonic() - t0)


def mqadmin(cluster: Any, *args: str) -> MqadminResult:
    return run_mqadmin(cluster, *args)


TIME = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(,\d{3})?")
COMPACT_TIME = re.compile(r"\b20\d{15}\b")  # UtilAll.timeMillisToHumanString: yyyyMMddHHmmssSSS
FLOAT = re.compile(r"-?\d+\.\d+(E-?\d+)?")
MILLIS = re.compile(r"\b1\d{12}\b")
TIMER = re.compile(r"\b\d+-\d+\(")  # clusterList's timer backlog (the timer wheel moves)


def norm_times(text: str) -> str:
    return MILLIS.sub("<ms>", COMPACT_TIME.sub("<t>", TIME.sub("<time>", text)))


def norm_rates(text: str) -> str:
    """Times, rates, and the column widths they change: one token list per line."""
    return "\n".join(" ".join(FLOAT.sub("<f>", TIMER.sub("<n>-<n>(", norm_times(line))).split())
                      for line in text.splitlines())


def retried(check: Callable[[], None], attempts: int = 3) -> None:
    """``check()``, run again when it fails: counts from the broker's sampled stats and live
    offsets can move between two tools' runs; a real difference fails every attempt."""
    for i in range(attempts):
        try:
            check()
            return
        except AssertionError:
            if i == attempts - 1:
                raise


def scenario_rows(normalise: Callable[[str], str], topic: str, text: str) -> str:
    """``normalise(text)`` with the rows of topics other than ``topic`` cut to their first column."""
    return "\n".join(line if line.split(" ", 1)[0] == topic else line.split(" ", 1)[0]
                     for line in normalise(text).splitlines())


JAVA_TRACE = re.compile(r"^\s+at [\w$.]+\(|command failed|The sub command \S+ not exist|^usage: ",
                        re.M)


def java_ok(result: MqadminResult) -> bool:
    """mqadmin succeeded: exit 0, in time, no stack trace on stdout and no "command failed"
    (tools.reference.mqadmin's ``ok`` also refuses any "Exception", which message tracks and
    client properties print, and traces of errors mqadmin reports and goes on after)."""
    return (result.returncode == 0 and not result.timed_out
            and not JAVA_TRACE.search(result.stdout) and "command failed" not in result.stderr)


def same_output(expected: str, got: str, normalise: Callable[[str], str] = norm_times) -> None:
    assert normalise(got) == normalise(expected)


def both(cluster: Any, tmp_path: Path, *args: str) -> tuple[MqadminResult, Run]:
    java = mqadmin(cluster, *args)
    ours = rmqadmin(cluster.namesrv_addr, *args, cwd=tmp_path)
    return java, ours


def assert_one_line_error(run: Run, *, code: int | None = None) -> str:
    assert run.returncode != 0, run
    if code is not None:
        assert run.returncode == code, run
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert "Traceback" not in run.stderr
    assert lines[0].startswith("rmqadmin")
    return lines[0]


# ---- the shared state --------------------------------------------------------------------------


@dataclass
class State:
    cluster: Any
    topic: str
    group: str
    consumer: Any
    sent: list[Any]
    client_id: str

    @property
    def namesrv(self) -> str:
        return self.cluster.namesrv_addr

    @property
    def broker(self) -> str:
        return self.cluster.broker_addr


def _wait(probe: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.2)


@pytest.fixture(scope="module")
def state(reference_cluster: Any) -> Iterator[State]:
    """A topic with 6 messages (tags, keys, a property) and a Java push consumer that has
    consumed them all and stays online for the module."""
    from tools.peers.java_peer import JavaPeer

    suffix = uuid.uuid4().hex[:8]
    topic, group = f"RmqadminT_{suffix}", f"RmqadminG_{suffix}"
    mqadmin(reference_cluster, "updateTopic", "-c", reference_cluster.cluster_name, "-t", topic,
            "-r", "4", "-w", "4").check()
    peer = JavaPeer(reference_cluster.namesrv_addr, version=reference_cluster.version)
    sent = peer.produce(topic, 6, tag="TagA", keys="k{i}", props={"p": "v{i}"}, body="hello {i}")
    consumer = peer.start_consumer(topic, 1_000_000, group=group, timeout_ms=1_800_000)
    try:
        consumer.wait_started()
        consumer.wait_for(6)

        def committed() -> bool:  # the consumer's offsets reach the broker every 5 s
            r = rmqadmin(reference_cluster.namesrv_addr, "consumerProgress", "-g", group, "--json")
            if r.returncode != 0:
                return False
            doc = json.loads(r.stdout)
            rows = [q for q in doc["queues"] if q["topic"] == topic]
            return len(rows) == 4 and all(q["diff"] == 0 for q in rows)

        _wait(committed, "the consumer's committed offsets")
        conn = json.loads(rmqadmin(reference_cluster.namesrv_addr, "consumerConnection", "-g",
                                   group, "--json").stdout)
        client_id = conn["connections"][0]["clientId"]
        yield State(reference_cluster, topic, group, consumer, sent, client_id)
    finally:
        consumer.stop()


# ---- read-only commands: same text --------------------------------------------------------------

#: (name, args builder, normaliser)
READ_ONLY: list[tuple[str, Callable[[State], list[str]], Callable[[str], str]]] = [
    ("clusterList", lambda s: ["clusterList"], norm_rates),
    ("clusterList -m", lambda s: ["clusterList", "-m"], norm_rates),
    ("clusterList -c", lambda s: ["clusterList", "-c", s.cluster.cluster_name], norm_rates),
    ("topicList", lambda s: ["topicList"], norm_times),
    ("topicList -c", lambda s: ["topicList", "-c"], norm_times),
    ("topicRoute", lambda s: ["topicRoute", "-t", s.topic], norm_times),
    ("topicRoute -l", lambda s: ["topicRoute", "-t", s.topic, "-l"], norm_times),
    ("topicStatus", lambda s: ["topicStatus", "-t", s.topic], norm_rates),
    ("topicStatus -c", lambda s: ["topicStatus", "-t", s.topic, "-c", s.cluster.cluster_name],
     norm_rates),
    ("topicClusterList", lambda s: ["topicClusterList", "-t", s.topic], norm_times),
    ("getBrokerConfig -b", lambda s: ["getBrokerConfig", "-b", s.broker], norm_times),
    ("getBrokerConfig -c", lambda s: ["getBrokerConfig", "-c", s.cluster.cluster_name],
     norm_times),
    ("getBrokerConfig unknown cluster", lambda s: ["getBrokerConfig", "-c", "NoSuchCluster"],
     norm_times),
    ("getNamesrvConfig", lambda s: ["getNamesrvConfig"], norm_times),
    ("consumerProgress", lambda s: ["consumerProgress"], norm_rates),
    ("consumerProgress -g", lambda s: ["consumerProgress", "-g", s.group], norm_rates),
    ("consumerProgress -g -t", lambda s: ["consumerProgress", "-g", s.group, "-t", s.topic],
     norm_rates),
    ("consumerProgress -s", lambda s: ["consumerProgress", "-g", s.group, "-s", "true"],
     norm_rates),
    ("consumerConnection", lambda s: ["consumerConnection", "-g", s.group], norm_times),
    ("consumerConnection -b", lambda s: ["consumerConnection", "-g", s.group, "-b", s.broker],
     norm_times),
    ("producerConnection", lambda s: ["producerConnection", "-g", "CLIENT_INNER_PRODUCER", "-t",
                                      s.topic], norm_times),
    ("consumerStatus", lambda s: ["consumerStatus", "-g", s.group], norm_times),
    ("consumerStatus -i", lambda s: ["consumerStatus", "-g", s.group, "-i", s.client_id],
     norm_rates),
    ("getConsumerConfig", lambda s: ["getConsumerConfig", "-g", s.group], norm_times),
    ("brokerConsumeStats", lambda s: ["brokerConsumeStats", "-b", s.broker], norm_times),
    ("statsAll -t", lambda s: ["statsAll", "-t", s.topic], norm_rates),
    ("statsAll", lambda s: ["statsAll"], norm_rates),
    ("allocateMQ", lambda s: ["allocateMQ", "-t", s.topic, "-i", "10.0.0.1,10.0.0.2,10.0.0.3"],
     norm_times),
    ("queryMsgById offset id", lambda s: ["queryMsgById", "-t", s.topic, "-i",
                                          s.sent[0].offset_msg_id], norm_times),
    ("queryMsgById unique key", lambda s: ["queryMsgById", "-t", s.topic, "-i",
                                           s.sent[1].msg_id, "-f", "UTF-8"], norm_times),
    ("queryMsgById two ids", lambda s: ["queryMsgById", "-t", s.topic, "-i",
                                        f"{s.sent[2].offset_msg_id},{s.sent[3].offset_msg_id}"],
     norm_times),
    ("queryMsgByKey", lambda s: ["queryMsgByKey", "-t", s.topic, "-k", "k2"], norm_times),
    ("queryMsgByUniqueKey", lambda s: ["queryMsgByUniqueKey", "-t", s.topic, "-i",
                                       s.sent[4].msg_id], norm_times),
    ("queryMsgByUniqueKey -a", lambda s: ["queryMsgByUniqueKey", "-t", s.topic, "-i",
                                          s.sent[4].msg_id, "-a"], norm_times),
    ("queryMsgByOffset", lambda s: ["queryMsgByOffset", "-t", s.topic, "-b",
                                    s.cluster.broker_name, "-i", "0", "-o", "1"], norm_times),
    ("printMsg", lambda s: ["printMsg", "-t", s.topic], norm_times),
    ("printMsg filtered", lambda s: ["printMsg", "-t", s.topic, "-s", "TagB", "-d", "false"],
     norm_times),
    ("printMsgByQueue", lambda s: ["printMsgByQueue", "-t", s.topic, "-a", s.cluster.broker_name,
                                   "-i", "0", "-p", "true", "-d", "true", "-f", "true"],
     norm_times),
    ("queryCq", lambda s: ["queryCq", "-t", s.topic, "-q", "0", "-i", "0"], norm_times),
    ("queryCq -g", lambda s: ["queryCq", "-t", s.topic, "-q", "1", "-i", "0", "-c", "2", "-g",
                              s.group], norm_times),
]

#: brokerStatus values change with every sample; the keys and these values must be equal.
STABLE_RUNTIME_KEYS = ("brokerVersion", "brokerVersionDesc", "bootTimestamp", "brokerActive",
                       "commitLogMaxOffset", "commitLogMinOffset", "msgPutTotalYesterdayMorning",
                       "msgPutTotalTodayMorning", "msgGetTotalYesterdayMorning",
                       "msgGetTotalTodayMorning")


@pytest.mark.parametrize("name,make_args,normalise", READ_ONLY, ids=[r[0] for r in READ_ONLY])
def test_read_only_command_prints_what_mqadmin_prints(state: State, tmp_path: Path, name: str,
                                                      make_args: Any, normalise: Any) -> None:
    args = make_args(state)
    if name == "statsAll":
        # Every topic of the session's cluster is listed, other modules' too: their rows are
        # compared by topic name, this scenario's in full.
        normalise = functools.partial(scenario_rows, normalise, state.topic)

    def check() -> None:
        java, ours = both(state.cluster, tmp_path, *args)
        if args[0] == "queryMsgByUniqueKey" and java.stdout == "":
            # mqadmin's query is asynchronous and prints nothing when the broker's answer is late
            # (seen on a loaded machine): ask it once more.
            java = mqadmin(state.cluster, *args)
        assert java_ok(java), java.stdout + java.stderr
        assert ours.returncode == 0, ours.stderr
        assert ours.stderr == ""
        same_output(java.stdout, ours.stdout, normalise)

    retried(check)
    if args[0] == "consumerStatus" and "-i" not in args:  # both wrote the running info file
        written = [p for p in tmp_path.rglob("*") if p.is_file()]  # one per attempt and name
        assert written and all(p.read_text().startswith("#Consumer Properties#\n") for p in written)


def _runtime(text: str) -> dict[str, str]:
    table = {}
    for line in text.splitlines():
        key, _, value = line.partition(": ")
        table[" ".join(key.split())] = value
    return table


@pytest.mark.parametrize("mode", ["-b", "-c"])
def test_broker_status_keys_and_stable_values(state: State, tmp_path: Path, mode: str) -> None:
    target = state.broker if mode == "-b" else state.cluster.cluster_name
    java, ours = both(state.cluster, tmp_path, "brokerStatus", mode, target)
    assert java_ok(java) and ours.returncode == 0, ours.stderr
    a, b = _runtime(java.stdout), _runtime(ours.stdout)
    assert list(a) == list(b)  # same keys, same order, same padding of the key column
    for key in a:
        if key.split()[-1] in STABLE_RUNTIME_KEYS:
            assert a[key] == b[key], key
    widths = {len(line.partition(": ")[0]) for line in ours.stdout.splitlines()}
    assert widths == {len(line.partition(": ")[0]) for line in java.stdout.splitlines()}


# ---- mutating commands: same text on twin resources, changes seen by mqadmin ---------------------


def _twins(prefix: str) -> tuple[str, str]:
    s = uuid.uuid4().hex[:6]
    return f"{prefix}{s}A", f"{prefix}{s}B"


def _compare_twins(state: State, tmp_path: Path, a: str, b: str, *args: str) -> Run:
    java = mqadmin(state.cluster, *[x.replace("{}", a) for x in args])
    ours = rmqadmin(state.namesrv, *[x.replace("{}", b) for x in args], cwd=tmp_path)
    assert java_ok(java), java.stdout + java.stderr
    assert ours.returncode == 0, ours.stderr
    same_output(java.stdout, ours.stdout.replace(b, a))
    return ours


def test_update_topic_perm_and_delete(state: State, tmp_path: Path) -> None:
    a, b = _twins("RmqadminTopic")
    c = state.cluster.cluster_name
    _compare_twins(state, tmp_path, a, b, "updateTopic", "-c", c, "-t", "{}", "-r", "3", "-w", "5")
    route = json.loads(rmqadmin(state.namesrv, "topicRoute", "-t", b, "--json").stdout)
    assert [(q["readQueueNums"], q["writeQueueNums"]) for q in route["queueDatas"]] == [(3, 5)]
    seen = mqadmin(state.cluster, "topicRoute", "-t", b, "-l").check()  # mqadmin sees our topic
    assert re.search(r"\s3\s+5\s+6\s*$", seen.stdout.splitlines()[1])
    _compare_twins(state, tmp_path, a, b, "updateTopic", "-b", state.broker, "-t", "{}", "-o",
                   "true", "-w", "2", "-r", "2")
    _compare_twins(state, tmp_path, a, b, "updateOrderConf", "-t", "{}", "-m", "get")
    _compare_twins(state, tmp_path, a, b, "updateTopicPerm", "-c", c, "-t", "{}", "-p", "4")
    assert " 4    " in mqadmin(state.cluster, "topicRoute", "-t", b, "-l").check().stdout
    _compare_twins(state, tmp_path, a, b, "updateTopicPerm", "-b", state.broker, "-t", "{}",
                   "-p", "6")
    _compare_twins(state, tmp_path, a, b, "updateTopicPerm", "-b", state.broker, "-t", "{}",
                   "-p", "6")  # "new perm equals to the old one!"
    _compare_twins(state, tmp_path, a, b, "updateOrderConf", "-t", "{}", "-m", "put", "-v",
                   f"{state.cluster.broker_name}:4")
    _compare_twins(state, tmp_path, a, b, "updateOrderConf", "-t", "{}", "-m", "delete")
    _compare_twins(state, tmp_path, a, b, "deleteTopic", "-t", "{}", "-c", c)
    topics = mqadmin(state.cluster, "topicList").check().stdout.split()
    assert a not in topics and b not in topics


def test_update_and_delete_subscription_group(state: State, tmp_path: Path) -> None:
    a, b = _twins("RmqadminGroup")
    c = state.cluster.cluster_name
    policy = '{"type":"EXPONENTIAL","exponentialRetryPolicy":{"initial":1000}}'
    _compare_twins(state, tmp_path, a, b, "updateSubGroup", "-c", c, "-g", "{}", "-r", "5", "-q",
                   "2", "-p", policy, "-d", "true")
    seen = mqadmin(state.cluster, "getConsumerConfig", "-g", b).check().stdout
    assert re.search(r"retryMaxTimes\s+=  5\n", seen) and "initial=1000" in seen
    _compare_twins(state, tmp_path, a, b, "getConsumerConfig", "-g", "{}")
    _compare_twins(state, tmp_path, a, b, "updateSubGroup", "-b", state.broker, "-g", "{}", "-s",
                   "false")
    _compare_twins(state, tmp_path, a, b, "deleteSubGroup", "-b", state.broker, "-g", "{}", "-r",
                   "true")
    _compare_twins(state, tmp_path, a, b, "updateSubGroup", "-b", state.broker, "-g", "{}")
    _compare_twins(state, tmp_path, a, b, "deleteSubGroup", "-c", c, "-g", "{}")
    assert mqadmin(state.cluster, "getConsumerConfig", "-g", b).stdout.strip() == ""


def test_kv_config_seen_by_mqadmin(state: State, tmp_path: Path) -> None:
    a, b = _twins("RmqadminKv")
    _compare_twins(state, tmp_path, a, b, "updateKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "{}",
                   "-v", "broker-x:3")
    seen = mqadmin(state.cluster, "updateOrderConf", "-t", b, "-m", "get").check().stdout
    assert seen == f"get orderConf success. topic=[{b}], orderConf=[broker-x:3] "
    _compare_twins(state, tmp_path, a, b, "deleteKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "{}")
    assert not mqadmin(state.cluster, "updateOrderConf", "-t", b, "-m", "get").ok


def test_namesrv_and_broker_config_updates(state: State, tmp_path: Path) -> None:
    java, ours = both(state.cluster, tmp_path, "updateNamesrvConfig", "-k", "clusterTest", "-v",
                      "false")
    assert java_ok(java) and ours.returncode == 0 and ours.stdout == java.stdout
    for target in (["-b", state.broker], ["-c", state.cluster.cluster_name]):
        java, ours = both(state.cluster, tmp_path, "updateBrokerConfig", *target, "-k",
                          "flushIntervalCommitLog", "-v", "600")
        assert java_ok(java) and ours.returncode == 0 and ours.stdout == java.stdout
    seen = mqadmin(state.cluster, "getBrokerConfig", "-b", state.broker).check().stdout
    assert re.search(r"^flushIntervalCommitLog\s+=  600$", seen, re.M)


def test_write_perm_wiped_and_added_back(state: State, tmp_path: Path) -> None:
    name = state.cluster.broker_name
    try:
        wipe = rmqadmin(state.namesrv, "wipeWritePerm", "-b", name)
        assert wipe.returncode == 0, wipe.stderr
        assert re.fullmatch(rf"wipe write perm of broker\[{name}\] in name server\["
                            rf"{re.escape(state.namesrv)}\] OK, \d+\n", wipe.stdout)
        row = mqadmin(state.cluster, "topicRoute", "-t", state.topic, "-l").check().stdout
        assert re.search(r"\s4\s*$", row.splitlines()[1])  # mqadmin sees it read only
        java = mqadmin(state.cluster, "wipeWritePerm", "-b", name).check()
        assert java.stdout == wipe.stdout  # the same topic count: both wipe every topic
    finally:
        add = rmqadmin(state.namesrv, "addWritePerm", "-b", name)
    assert add.returncode == 0, add.stderr
    java = mqadmin(state.cluster, "addWritePerm", "-b", name).check()
    assert java.stdout == add.stdout
    row = mqadmin(state.cluster, "topicRoute", "-t", state.topic, "-l").check().stdout
    assert re.search(r"\s6\s*$", row.splitlines()[1])


def test_clean_expired_cq_and_commit_log(state: State, tmp_path: Path) -> None:
    for args in (["cleanExpiredCQ"], ["cleanExpiredCQ", "-b", state.broker],
                 ["deleteExpiredCommitLog", "-c", state.cluster.cluster_name],
                 ["deleteExpiredCommitLog", "-b", state.broker]):
        java, ours = both(state.cluster, tmp_path, *args)
        assert java_ok(java) and ours.returncode == 0, ours.stderr
        assert ours.stdout == java.stdout == "success"


def test_clone_group_offset(state: State, tmp_path: Path) -> None:
    a, b = _twins("RmqadminClone")
    for g in (a, b):
        mqadmin(state.cluster, "updateSubGroup", "-c", state.cluster.cluster_name, "-g", g).check()
    _compare_twins(state, tmp_path, a, b, "cloneGroupOffset", "-s", state.group, "-d", "{}", "-t",
                   state.topic)
    # the clone's offsets, read back by mqadmin, are those of the source group
    src = json.loads(rmqadmin(state.namesrv, "consumerProgress", "-g", state.group, "-t",
                              state.topic, "--json").stdout)
    cloned = mqadmin(state.cluster, "consumerProgress", "-g", b, "-t", state.topic).check().stdout
    rows = [line.split() for line in cloned.splitlines() if line.startswith(state.topic)]
    assert {int(r[2]): int(r[4]) for r in rows} == {
        q["queueId"]: q["consumerOffset"] for q in src["queues"] if q["topic"] == state.topic}
    _compare_twins(state, tmp_path, a, b, "consumerProgress", "-g", "{}", "-t", state.topic)


def test_reset_offset_reaches_the_running_java_consumer(state: State, tmp_path: Path) -> None:
    before = len(state.consumer.records)
    java, ours = both(state.cluster, tmp_path, "resetOffsetByTime", "-g", state.group, "-t",
                      state.topic, "-s", "0")
    assert java_ok(java) and ours.returncode == 0, ours.stderr
    assert ours.stdout == java.stdout
    assert ours.stdout.startswith("start reset consumer offset by specified, group[")
    # two resets to 0: the consumer gets the 6 messages again (at least once more)
    state.consumer.wait_for(before + 6, timeout=60)
    java, ours = both(state.cluster, tmp_path, "resetOffsetByTime", "-g", state.group, "-t",
                      state.topic, "-s", "0", "-b", state.broker, "-q", "1")
    assert ours.returncode == 0 and ours.stdout == java.stdout
    java, ours = both(state.cluster, tmp_path, "resetOffsetByTime", "-g", state.group, "-t",
                      state.topic, "-s", "now", "-b", state.broker, "-q", "2", "-o", "1")
    assert ours.returncode == 0
    same_output(java.stdout, ours.stdout)


# ---- sendMessage, consumeMessage, tail, produce ------------------------------------------------


def test_send_message(state: State, tmp_path: Path) -> None:
    a, b = _twins("RmqadminSend")
    for t in (a, b):
        mqadmin(state.cluster, "updateTopic", "-c", state.cluster.cluster_name, "-t", t, "-r", "1",
                "-w", "1").check()
    java = mqadmin(state.cluster, "sendMessage", "-t", a, "-p", "hello", "-k", "k", "-c", "TagS")
    ours = rmqadmin(state.namesrv, "sendMessage", "-t", b, "-p", "hello", "-k", "k", "-c", "TagS")
    assert java_ok(java) and ours.returncode == 0, ours.stderr
    j, o = java.stdout.splitlines(), ours.stdout.splitlines()
    assert o[0] == j[0] == "#Broker Name                      #QID  #Send Result            #MsgId"
    # same columns; the message id is new each time
    assert o[1].rsplit(None, 1)[0] == j[1].rsplit(None, 1)[0]
    msg_id = o[1].split()[-1]
    seen = mqadmin(state.cluster, "queryMsgByUniqueKey", "-t", b, "-i", msg_id).check().stdout
    assert "Tags:                [TagS]" in seen and "Keys:                [k]" in seen
    refused = rmqadmin(state.namesrv, "sendMessage", "-t", b, "-p", "x", "-i", "0")
    assert refused.stdout == "Broker name must be set if the queue is chosen!"


#: a resend's new message: its offset id and queue offset differ by nature.
RESENT = re.compile(r"offsetMsgId=([0-9A-F]{32}), messageQueue=MessageQueue \[topic=(\S+), "
                    r"brokerName=(\S+), queueId=(\d+)\], queueOffset=(\d+)")


def norm_resend(text: str) -> str:
    return RESENT.sub(r"offsetMsgId=<id>, messageQueue=MessageQueue [topic=\2, brokerName=\3, "
                      r"queueId=\4], queueOffset=<n>", text)


def _resend_topic(cluster: Any) -> tuple[str, str, str]:
    """A one-queue topic with one message sent by mqadmin: (topic, msgId, offsetMsgId)."""
    topic = f"RmqadminResend_{uuid.uuid4().hex[:6]}"
    run_mqadmin(cluster, "updateTopic", "-c", cluster.cluster_name, "-t", topic, "-r", "1", "-w",
                "1").check()
    sent = run_mqadmin(cluster, "sendMessage", "-t", topic, "-p", "resend me", "-k", "rk", "-c",
                       "TagR").check()
    uniq = sent.stdout.splitlines()[1].split()[-1]
    found = rmqadmin(cluster.namesrv_addr, "queryMsgById", "-t", topic, "-i", uniq, "--json")
    assert found.returncode == 0, found.stderr
    return topic, uniq, json.loads(found.stdout)["messages"][0]["offsetMsgId"]


def _assert_resent(cluster: Any, topic: str, uniq: str, stdout: str) -> None:
    """The new message is on the broker, read back by mqadmin: the original's topic, tags, keys,
    body and UNIQ_KEY (the resend keeps the message id)."""
    new_id = RESENT.search(stdout).group(1)  # type: ignore[union-attr]
    seen = run_mqadmin(cluster, "queryMsgById", "-t", topic, "-i", new_id, "-f", "UTF-8",
                       version="5.3.3")  # 4.9.7's has no -f
    assert java_ok(seen), seen.stdout + seen.stderr
    assert f"OffsetID:            {new_id}\n" in seen.stdout
    for line in ("Tags:                [TagR]", "Keys:                [rk]",
                 "Message Body:        resend me"):
        assert line in seen.stdout, seen.stdout
    assert f"UNIQ_KEY={uniq}" in seen.stdout


def test_query_msg_by_id_resends(state: State, tmp_path: Path) -> None:
    """queryMsgById -s true: both tools look the message up (by offset id, by unique key with a
    unit name) and send it again as stored; the same text but for the new offset id and queue
    offset, and the copies are on the broker. -s false does nothing, in either tool."""
    topic, uniq, offset_id = _resend_topic(state.cluster)
    for ident, extra in ((offset_id, []), (uniq, ["-u", "unitR"])):
        java, ours = both(state.cluster, tmp_path, "queryMsgById", "-t", topic, "-i", ident, "-s",
                          "true", *extra)
        assert java_ok(java), java.stdout + java.stderr
        assert ours.returncode == 0 and ours.stderr == "", ours.stderr
        assert ours.stdout.startswith(f"prepare resend msg. originalMsgId={ident}SendResult "
                                      f"[sendStatus=SEND_OK, msgId={uniq}, ")
        same_output(java.stdout, ours.stdout, norm_resend)
        _assert_resent(state.cluster, topic, uniq, java.stdout)
        _assert_resent(state.cluster, topic, uniq, ours.stdout)
    java, ours = both(state.cluster, tmp_path, "queryMsgById", "-t", topic, "-i", uniq, "-s",
                      "false")
    assert java_ok(java) and ours.returncode == 0 and ours.stdout == java.stdout == ""

    def five() -> bool:  # the original and 4 copies, found by their key
        rows = rmqadmin(state.namesrv, "queryMsgByKey", "-t", topic, "-k", "rk").stdout
        return len(rows.splitlines()) == 6

    _wait(five, "the original message and its 4 copies by key")
    bad = rmqadmin(state.namesrv, "queryMsgById", "-t", topic, "-i", "ZZ-not-an-id", "-s", "true")
    assert "NO_MESSAGE (208)" in assert_one_line_error(bad, code=1)


@pytest.mark.parametrize("args", [["-c", "3"], ["-b", "{broker}", "-i", "1", "-o", "0"],
                                  ["-b", "{broker}", "-i", "2"], ["-c", "0"], ["-i", "1"]],
                         ids=["count", "queue+offset", "queue", "bad count", "queue no broker"])
def test_consume_message(state: State, tmp_path: Path, args: list[str]) -> None:
    args = [x.replace("{broker}", state.cluster.broker_name) for x in args]
    java, ours = both(state.cluster, tmp_path, "consumeMessage", "-t", state.topic, *args)
    assert java_ok(java) and ours.returncode == 0, ours.stderr
    same_output(java.stdout, ours.stdout)


def test_tail_follows_a_java_producer_and_stops_on_ctrl_c(state: State) -> None:
    import signal
    import threading

    from tools.peers.java_peer import JavaPeer

    since = str(int(time.time() * 1000))
    proc = subprocess.Popen(
        [sys.executable, "-m", "rmqwire", "admin", "tail", "-t", state.topic, "--from", since,
         "--format", "json", "-n", state.namesrv],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    lines: list[tuple[float, dict[str, Any]]] = []

    def read() -> None:
        for line in proc.stdout:  # type: ignore[union-attr]
            lines.append((time.time(), json.loads(line)))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    peer = JavaPeer(state.namesrv)

    def seen(msg_id: str) -> list[tuple[float, dict[str, Any]]]:
        return [(t, d) for t, d in list(lines) if d["msgId"] == msg_id]

    try:
        # a first message shows tail is up and polling (it started from a timestamp: none is lost)
        first = peer.produce(state.topic, 1, body="warm-up", tag="TagW")
        _wait(lambda: seen(first[0].msg_id), "the first message in tail's output", timeout=60)
        sent = peer.produce(state.topic, 1, body="tailed", tag="TagT")
        arrived, doc = _wait(lambda: seen(sent[0].msg_id), "the message in tail's output",
                             timeout=30)[0]
        assert doc["body"] == "tailed" and doc["tags"] == "TagT"
        assert arrived * 1000 - doc["storeTimestamp"] < 1000, "tail saw the message after > 1 s"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 0
        assert "Traceback" not in proc.stderr.read()  # type: ignore[union-attr]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_produce_lines_reach_a_java_consumer(state: State, tmp_path: Path) -> None:
    from tools.peers.java_peer import JavaPeer

    topic = f"RmqadminProduce_{uuid.uuid4().hex[:6]}"
    mqadmin(state.cluster, "updateTopic", "-c", state.cluster.cluster_name, "-t", topic).check()
    lines = [f"line {i}" for i in range(5)]
    p = subprocess.run(
        [sys.executable, "-m", "rmqwire", "admin", "produce", "-t", topic, "--tags", "TagP",
         "--keys", "pk", "--property", "a=b", "--property", "c=d", "--batch", "2", "--json",
         "-n", state.namesrv], input="\n".join(lines) + "\n", capture_output=True, text=True,
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    assert (summary["sent"], summary["failed"], summary["batches"]) == (5, 0, 3)
    got = JavaPeer(state.namesrv).consume(topic, 5, group=f"RmqadminProduceG_{uuid.uuid4().hex[:6]}")
    assert sorted(r.body.decode() for r in got) == lines
    for r in got:
        assert (r.tags, r.keys) == ("TagP", "pk")
        assert {"a": "b", "c": "d"}.items() <= r.user_properties.items()


# ---- bad input: one line, non-zero exit ----------------------------------------------------------


def test_listing_and_help(state: State) -> None:
    listing = rmqadmin(None, env={"NAMESRV_ADDR": ""})
    assert listing.returncode == 0
    assert listing.stdout.startswith("The most commonly used rmqadmin commands are:\n")
    assert re.search(r"^   clusterList {25}List cluster infos\.$", listing.stdout, re.M)
    helped = rmqadmin(None, "help", "TOPICSTATUS")
    assert helped.returncode == 0 and "-t, --topic" in helped.stdout
    # names match case-insensitively, as mqadmin's do
    run = rmqadmin(state.namesrv, "TOPICROUTE", "-t", state.topic, "-l")
    assert run.returncode == 0 and run.stdout.startswith("#ClusterName")


@pytest.mark.parametrize("args,code,needle", [
    (["noSuchCommand"], 2, "The sub command noSuchCommand not exist."),
    (["topicStatus"], 2, "Missing option '-t'"),
    (["topicStatus", "-t", "NoSuchTopic_rmqadmin"], 1, "TOPIC_NOT_EXIST (17)"),
    (["consumerConnection", "-g", "NoSuchGroup_rmqadmin"], 1, "TOPIC_NOT_EXIST (17)"),
    (["consumerProgress", "-g", "NoSuchGroup_rmqadmin"], 1, "TOPIC_NOT_EXIST (17)"),
    (["queryMsgById", "-t", "{topic}", "-i", "ZZ-not-an-id"], 1, "NO_MESSAGE (208)"),
    (["queryMsgByOffset", "-t", "{topic}", "-b", "broker-a", "-i", "x", "-o", "0"], 1,
     "-i/--queueId must be an integer"),
    (["brokerStatus"], 1, "give exactly one of -b/--brokerAddr and -c/--clusterName"),
    # the broker answers without a body (mqadmin: a NullPointerException trace)
    (["queryCq", "-t", "{topic}", "-q", "0", "-i", "99"], 1, "Index 99 of 0@"),
])
def test_bad_input_gives_one_line(state: State, args: list[str], code: int, needle: str) -> None:
    run = rmqadmin(state.namesrv, *[a.replace("{topic}", state.topic) for a in args])
    line = assert_one_line_error(run, code=code)
    assert needle in line
    assert run.stdout == ""


def test_unreachable_namesrv_fails_within_the_timeout() -> None:
    run = rmqadmin("127.0.0.1:1", "clusterList", "--timeout", "3")
    line = assert_one_line_error(run, code=1)
    assert "127.0.0.1:1" in line
    assert run.elapsed_s < 30


def test_no_namesrv_at_all() -> None:
    run = rmqadmin(None, "clusterList", env={"NAMESRV_ADDR": ""})
    assert "no NameServer address" in assert_one_line_error(run, code=1)


def test_namesrv_addr_env_and_failover(state: State) -> None:
    run = rmqadmin(None, "topicClusterList", "-t", state.topic,
                   env={"NAMESRV_ADDR": f"127.0.0.1:1;{state.namesrv}"})
    assert run.returncode == 0, run.stderr
    assert run.stdout == f"{state.cluster.cluster_name}\n"


# ---- --json ------------------------------------------------------------------------------------

JSON_FIELDS: list[tuple[str, Callable[[State], list[str]], set[str]]] = [
    ("clusterList", lambda s: ["clusterList"], {"brokers"}),
    ("clusterList -m", lambda s: ["clusterList", "-m"], {"brokers"}),
    ("topicList", lambda s: ["topicList"], {"topics"}),
    ("topicList -c", lambda s: ["topicList", "-c"], {"rows"}),
    ("topicRoute", lambda s: ["topicRoute", "-t", s.topic], {"brokerDatas", "queueDatas"}),
    ("topicStatus", lambda s: ["topicStatus", "-t", s.topic], {"topic", "queues", "topicPutTps"}),
    ("topicClusterList", lambda s: ["topicClusterList", "-t", s.topic], {"topic", "clusters"}),
    ("brokerStatus", lambda s: ["brokerStatus", "-b", s.broker], {"brokers"}),
    ("getBrokerConfig", lambda s: ["getBrokerConfig", "-b", s.broker], {"brokers"}),
    ("getNamesrvConfig", lambda s: ["getNamesrvConfig"], {"nameServers"}),
    ("consumerProgress", lambda s: ["consumerProgress"], {"groups"}),
    ("consumerProgress -g", lambda s: ["consumerProgress", "-g", s.group],
     {"group", "queues", "consumeTps", "diffTotal", "inflightTotal"}),
    ("consumerConnection", lambda s: ["consumerConnection", "-g", s.group],
     {"group", "connections", "subscriptions", "consumeType", "messageModel", "consumeFromWhere"}),
    ("producerConnection", lambda s: ["producerConnection", "-g", "CLIENT_INNER_PRODUCER", "-t",
                                      s.topic], {"group", "connections"}),
    ("consumerStatus", lambda s: ["consumerStatus", "-g", s.group],
     {"group", "clients", "subscriptionSame", "rebalanceOk"}),
    ("consumerStatus -i", lambda s: ["consumerStatus", "-g", s.group, "-i", s.client_id],
     {"group", "clientId", "runningInfo"}),
    ("getConsumerConfig", lambda s: ["getConsumerConfig", "-g", s.group], {"brokers"}),
    ("brokerConsumeStats", lambda s: ["brokerConsumeStats", "-b", s.broker], {"rows", "diffTotal"}),
    ("statsAll", lambda s: ["statsAll", "-t", s.topic], {"rows"}),
    ("allocateMQ", lambda s: ["allocateMQ", "-t", s.topic, "-i", "a,b"], {"result"}),
    ("queryMsgById", lambda s: ["queryMsgById", "-t", s.topic, "-i", s.sent[0].offset_msg_id],
     {"messages"}),
    ("queryMsgByKey", lambda s: ["queryMsgByKey", "-t", s.topic, "-k", "k1"],
     {"topic", "key", "messages"}),
    ("queryMsgByUniqueKey", lambda s: ["queryMsgByUniqueKey", "-t", s.topic, "-i",
                                       s.sent[1].msg_id], {"messages"}),
    ("queryMsgByOffset", lambda s: ["queryMsgByOffset", "-t", s.topic, "-b",
                                    s.cluster.broker_name, "-i", "0", "-o", "0"],
     {"status", "messages"}),
    ("printMsg", lambda s: ["printMsg", "-t", s.topic], {"topic", "queues"}),
    ("printMsgByQueue", lambda s: ["printMsgByQueue", "-t", s.topic, "-a", s.cluster.broker_name,
                                   "-i", "0", "-p", "true"], {"queue", "messages", "tags"}),
    ("queryCq", lambda s: ["queryCq", "-t", s.topic, "-q", "0", "-i", "0"],
     {"queueData", "maxQueueIndex"}),
]


@pytest.mark.parametrize("name,make_args,fields", JSON_FIELDS, ids=[j[0] for j in JSON_FIELDS])
def test_json_output_parses_with_documented_fields(state: State, tmp_path: Path, name: str,
                                                   make_args: Any, fields: set[str]) -> None:
    run = rmqadmin(state.namesrv, *make_args(state), "--json", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert fields <= set(doc), (fields - set(doc))


def test_json_message_fields(state: State) -> None:
    run = rmqadmin(state.namesrv, "queryMsgById", "-t", state.topic, "-i",
                   state.sent[0].offset_msg_id, "--json")
    (msg,) = json.loads(run.stdout)["messages"]
    assert msg["msgId"] == state.sent[0].msg_id
    assert msg["offsetMsgId"] == state.sent[0].offset_msg_id
    assert (msg["tags"], msg["keys"], msg["properties"]["p"]) == ("TagA", "k0", "v0")
    assert {"consumerGroup": state.group, "trackType": "CONSUMED",
            "exceptionDesc": None} in msg["tracks"]


# ---- ACL: --accessKey/--secretKey and tools.yml --------------------------------------------------


def test_acl_credentials_by_option_and_tools_yml(reference_cluster_factory: Any,
                                                 tmp_path: Path) -> None:
    from tools.reference.cluster import Authentication

    cluster = reference_cluster_factory(version="5.3.3",
                                        authentication=Authentication("rmqadmin", "rmqadmin-secret"))
    unsigned = rmqadmin(cluster.namesrv_addr, "brokerStatus", "-b", cluster.broker_addr)
    assert "(" in assert_one_line_error(unsigned, code=1)
    signed = rmqadmin(cluster.namesrv_addr, "brokerStatus", "-b", cluster.broker_addr,
                      "--accessKey", "rmqadmin", "--secretKey", "rmqadmin-secret")
    assert signed.returncode == 0, signed.stderr
    assert "brokerVersionDesc" in signed.stdout
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "tools.yml").write_text("accessKey: rmqadmin\nsecretKey: rmqadmin-secret\n")
    by_file = rmqadmin(cluster.namesrv_addr, "brokerStatus", "-b", cluster.broker_addr,
                       env={"ROCKETMQ_HOME": str(home)})
    assert by_file.returncode == 0, by_file.stderr


# ---- 4.9.7 ------------------------------------------------------------------------------------

#: rmqadmin prints what mqadmin 5.3.3 prints, against a 4.9.7 cluster too ("5": compared with
#: 5.3.3's mqadmin), and for most commands that is 4.9.7's own text ("4"). 4.9.7's topicRoute has
#: no enableActingMaster and its clusterList fewer columns. 5.3.3's topicStatus fails against a
#: 4.9.7 broker (it asks for GET_TOPIC_CONFIG, which 4.9.7 lacks); rmqadmin's does not, and prints
#: 4.9.7's text plus 5.3.3's "Topic Put TPS" line. Where a message's properties are printed,
#: 4.9.7's mqadmin walks them in a HashMap(16)'s order, 5.3.3's (and rmqadmin) in a HashMap(128)'s
#: ("4p": equal to 4.9.7's once each map's entries are sorted).
#: 4.9.7's queryMsgById has no -t.
V4_COMMANDS: list[tuple[str, Callable[[Any, V4Scenario], list[str]], Callable[[str], str], str]] = [
    ("topicList", lambda c, v: ["topicList"], norm_times, "54"),
    ("topicList -c", lambda c, v: ["topicList", "-c"], norm_times, "54"),
    ("topicRoute", lambda c, v: ["topicRoute", "-t", v.topic], norm_times, "5"),
    ("topicRoute -l", lambda c, v: ["topicRoute", "-t", v.topic, "-l"], norm_times, "54"),
    ("topicStatus", lambda c, v: ["topicStatus", "-t", v.topic], norm_rates, "4"),
    ("topicClusterList", lambda c, v: ["topicClusterList", "-t", v.topic], norm_times, "54"),
    ("clusterList", lambda c, v: ["clusterList"], norm_rates, "5"),
    ("clusterList -m", lambda c, v: ["clusterList", "-m"], norm_rates, "54"),
    ("getBrokerConfig", lambda c, v: ["getBrokerConfig", "-b", c.broker_addr], norm_times, "54"),
    ("getNamesrvConfig", lambda c, v: ["getNamesrvConfig"], norm_times, "54"),
    ("statsAll -t", lambda c, v: ["statsAll", "-t", v.topic], norm_rates, "54"),
    ("queryMsgByKey", lambda c, v: ["queryMsgByKey", "-t", v.topic, "-k", "k1"], norm_times, "54"),
    ("queryMsgById", lambda c, v: ["queryMsgById", "-t", v.topic, "-i", v.sent[0].offset_msg_id],
     norm_times, "5"),
    ("queryMsgByUniqueKey", lambda c, v: ["queryMsgByUniqueKey", "-t", v.topic, "-i",
                                          v.sent[1].msg_id], norm_times, "54p"),
    ("queryMsgByOffset", lambda c, v: ["queryMsgByOffset", "-t", v.topic, "-b", c.broker_name, "-i",
                                       str(v.sent[0].queue.queue_id), "-o",
                                       str(v.sent[0].queue_offset)], norm_times, "54p"),
    ("printMsg", lambda c, v: ["printMsg", "-t", v.topic], norm_times, "54p"),
    ("consumeMessage", lambda c, v: ["consumeMessage", "-t", v.topic, "-c", "2"], norm_times,
     "54p"),
    ("queryCq", lambda c, v: ["queryCq", "-t", v.topic, "-q", str(v.sent[0].queue.queue_id), "-i",
                              str(v.sent[0].queue_offset)], norm_times, "54"),
    ("allocateMQ", lambda c, v: ["allocateMQ", "-t", v.topic, "-i", "10.0.0.1,10.0.0.2"],
     norm_times, "54"),
    ("printMsgByQueue", lambda c, v: ["printMsgByQueue", "-t", v.topic, "-a", c.broker_name, "-i",
                                      "0", "-f", "true"], norm_times, "54"),
]


@dataclass(frozen=True)
class V4Scenario:
    topic: str
    sent: list[Any]


def new_v4_topic(cluster: Any, prefix: str) -> V4Scenario:
    """A new 4-queue topic on the 4.9.7 cluster with 3 messages from the Java producer."""
    from tools.peers.java_peer import JavaPeer

    topic = f"{prefix}_{uuid.uuid4().hex[:8]}"
    run_mqadmin(cluster, "updateTopic", "-c", cluster.cluster_name, "-t", topic, "-r", "4", "-w",
                "4").check()
    sent = JavaPeer(cluster.namesrv_addr).produce(topic, 3, keys="k{i}", tag="TagA")
    return V4Scenario(topic, sent)


@pytest.fixture(scope="module")
def v4_topic(reference_cluster_v4: Any) -> V4Scenario:
    return new_v4_topic(reference_cluster_v4, "RmqadminV4")


@pytest.mark.slow
@pytest.mark.parametrize("name,make_args,normalise,against", V4_COMMANDS,
                         ids=[c[0] for c in V4_COMMANDS])
def test_v4_cluster_same_output(reference_cluster_v4: Any, v4_topic: V4Scenario, tmp_path: Path,
                                name: str, make_args: Any, normalise: Any, against: str) -> None:
    args = make_args(reference_cluster_v4, v4_topic)
    retried(lambda: compare_on_v4(reference_cluster_v4, args, normalise, against, tmp_path))


def compare_on_v4(cluster: Any, args: list[str], normalise: Callable[[str], str], against: str,
                  tmp_path: Path, *, quiet: bool = False) -> str:
    """rmqadmin's output on the 4.9.7 cluster (returned) equals 5.3.3's mqadmin's ("5" in
    ``against``) and 4.9.7's own ("4"; "p": with property maps sorted, 4.9.7 prints HashMap order);
    ``quiet``: rmqadmin printed nothing on stderr."""
    ns = cluster.namesrv_addr
    ours = rmqadmin(ns, *args, cwd=tmp_path)
    assert ours.returncode == 0, ours.stderr
    assert not quiet or ours.stderr == "", ours.stderr
    if "5" in against:
        java5 = run_mqadmin(ns, *args, version="5.3.3")
        assert java_ok(java5), java5.stdout + java5.stderr
        same_output(java5.stdout, ours.stdout, normalise)
    if "4" in against:
        java4 = run_mqadmin(cluster, *args)
        assert java_ok(java4), java4.stdout + java4.stderr
        text = ours.stdout
        if args[0] == "topicStatus":
            text, tps = text.rsplit("\n\n", 1)
            assert tps.startswith("Topic Put TPS: ")
            text += "\n"
        if "p" in against:
            same_output(java4.stdout, text, lambda t: normalise(sorted_maps(t)))
            assert PROPERTY_MAP.search(text)  # there were properties to compare
        else:
            same_output(java4.stdout, text, normalise)
    return ours.stdout


PROPERTY_MAP = re.compile(r"(?<=[Pp]roperties[=:])(\s*)\{([^{}]*)\}")


def sorted_maps(text: str) -> str:
    """Each printed properties map with its entries sorted."""
    return PROPERTY_MAP.sub(lambda m: m.group(1) + "{" + ", ".join(sorted(m.group(2).split(", "))) + "}",
                            text)


@dataclass(frozen=True)
class V4Consumer:
    scenario: V4Scenario
    group: str
    client_id: str


@pytest.fixture(scope="module")
def v4_consumer(reference_cluster_v4: Any, v4_topic: V4Scenario) -> Iterator[V4Consumer]:
    """A Java push consumer (the 5.3.3 client: the peer is built against it) on the 4.9.7
    cluster that consumed v4_topic's 3 messages and stays online."""
    from tools.peers.java_peer import JavaPeer

    ns = reference_cluster_v4.namesrv_addr
    group = f"RmqadminV4G_{uuid.uuid4().hex[:8]}"
    peer = JavaPeer(ns)
    consumer = peer.start_consumer(v4_topic.topic, 1_000_000, group=group, timeout_ms=1_800_000)
    try:
        consumer.wait_started()
        consumer.wait_for(len(v4_topic.sent))

        def committed() -> bool:
            r = rmqadmin(ns, "consumerProgress", "-g", group, "--json")
            rows = [q for q in json.loads(r.stdout)["queues"] if q["topic"] == v4_topic.topic] \
                if r.returncode == 0 else []
            return len(rows) == 4 and all(q["diff"] == 0 for q in rows)

        _wait(committed, "the consumer's committed offsets on 4.9.7")
        conn = json.loads(rmqadmin(ns, "consumerConnection", "-g", group, "--json").stdout)
        yield V4Consumer(v4_topic, group, conn["connections"][0]["clientId"])
    finally:
        consumer.stop()


#: (Before the commands below, which reset its offsets.) Read-only commands about the 4.9.7 consumer whose numbers are sampled or shared with other
#: modules' groups on the session's cluster: only this scenario's rows are compared (others cut to
#: their first column) and a difference is asked again, as in READ_ONLY. "4": equal to 4.9.7's
#: mqadmin; "5": equal to 5.3.3's mqadmin run against 4.9.7. 5.3.3's consumerProgress -g and
#: getConsumerConfig fail against 4.9.7 (request codes it lacks); rmqadmin prints 4.9.7's text
#: there: no Inflight column and "Diff Total" (4.9.7 sends no pullOffset), and 4.9.7's
#: SubscriptionGroupConfig fields (taken from GET_ALL_SUBSCRIPTIONGROUP_CONFIG, as 4.9.7 does).
#: consumerProgress without -g: 5.3.3's prints TPS and Diff Total 0 for every group with offsets
#: (its consume stats fail on GET_TOPIC_CONFIG, see test_v4_offline_group_progress); rmqadmin
#: prints 4.9.7's numbers.
V4_SAMPLED: list[tuple[str, Callable[[Any, V4Consumer], list[str]], Callable[[V4Consumer], Callable[[str], str]], str]] = [
    ("producerConnection", lambda c, v: ["producerConnection", "-g", "CLIENT_INNER_PRODUCER", "-t",
                                         v.scenario.topic], lambda v: norm_times, "54"),
    ("brokerConsumeStats", lambda c, v: ["brokerConsumeStats", "-b", c.broker_addr],
     lambda v: functools.partial(scenario_rows, norm_rates, v.scenario.topic), "54"),
    ("consumerProgress", lambda c, v: ["consumerProgress"],
     lambda v: functools.partial(scenario_rows, norm_rates, v.group), "4"),
    ("consumerProgress -g", lambda c, v: ["consumerProgress", "-g", v.group],
     lambda v: norm_rates, "4"),
    ("getConsumerConfig", lambda c, v: ["getConsumerConfig", "-g", v.group], lambda v: norm_times,
     "4"),
]


@pytest.mark.slow
@pytest.mark.parametrize("name,make_args,make_normalise,against", V4_SAMPLED,
                         ids=[c[0] for c in V4_SAMPLED])
def test_v4_sampled_commands(reference_cluster_v4: Any, v4_consumer: V4Consumer, tmp_path: Path,
                             name: str, make_args: Any, make_normalise: Any, against: str) -> None:
    args = make_args(reference_cluster_v4, v4_consumer)
    shown: list[str] = []
    retried(lambda: shown.append(compare_on_v4(reference_cluster_v4, args,
                                               make_normalise(v4_consumer), against, tmp_path,
                                               quiet=True)))
    v = v4_consumer
    assert any(needle in shown[-1] for needle in (v.scenario.topic, v.group, v.client_id))


def _queue_diffs(ns: str, group: str, topic: str) -> list[int]:
    """The group's Diff per queue of ``topic``, as rmqadmin shows them (none while it fails)."""
    r = rmqadmin(ns, "consumerProgress", "-g", group, "--json")
    return [q["diff"] for q in json.loads(r.stdout)["queues"] if q["topic"] == topic] \
        if r.returncode == 0 else []


@pytest.mark.slow
def test_v4_offline_group_progress(reference_cluster_v4: Any, tmp_path: Path) -> None:
    """consumerProgress of a group whose consumer stopped 3 messages behind, on 4.9.7: rmqadmin
    prints 4.9.7's mqadmin's text, Diff Total 3, with and without -g. 5.3.3's mqadmin prints 0
    there without -g and fails with -g: after GET_CONSUME_STATS it asks each broker
    GET_TOPIC_CONFIG (for static topics), which a 4.x broker refuses, and its consumerProgress
    then shows the group as if it had no stats (DefaultMQAdminExtImpl.examineConsumeStats)."""
    from tools.peers.java_peer import JavaPeer

    c = reference_cluster_v4
    ns = c.namesrv_addr
    topic, group = new_v4_topic(c, "RmqadminV4Off").topic, f"RmqadminV4OffG_{uuid.uuid4().hex[:8]}"
    peer = JavaPeer(ns)
    consumer = peer.start_consumer(topic, 1_000_000, group=group, timeout_ms=600_000)
    try:
        consumer.wait_started()
        consumer.wait_for(3)
        _wait(lambda: _queue_diffs(ns, group, topic) == [0] * 4,
              "the consumer's committed offsets on 4.9.7")
    finally:
        consumer.stop()
    peer.produce(topic, 3, keys="k{i}", tag="TagA")
    _wait(lambda: sum(_queue_diffs(ns, group, topic)) == 3, "3 messages behind the stopped consumer")
    all_groups = compare_on_v4(c, ["consumerProgress"],
                               functools.partial(scenario_rows, norm_rates, group), "4", tmp_path,
                               quiet=True)
    assert re.search(rf"^{group} +0 +OFFLINE +0 +3$", all_groups, re.M), all_groups
    one = compare_on_v4(c, ["consumerProgress", "-g", group], norm_rates, "4", tmp_path, quiet=True)
    assert one.endswith("Diff Total: 3\n") and "#Inflight" not in one, one
    java5 = run_mqadmin(ns, "consumerProgress", version="5.3.3")
    assert re.search(rf"^{group} +0 +OFFLINE +0 +0$", java5.stdout, re.M), java5.stdout


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["-b", "-c"])
def test_v4_broker_status_keys_and_stable_values(reference_cluster_v4: Any, tmp_path: Path,
                                                 mode: str) -> None:
    """brokerStatus against 4.9.7: the same keys, order and padding as 4.9.7's mqadmin and 5.3.3's
    (run against 4.9.7), and the same stable values."""
    c = reference_cluster_v4
    args = ("brokerStatus", mode, c.broker_addr if mode == "-b" else c.cluster_name)
    ours = rmqadmin(c.namesrv_addr, *args, cwd=tmp_path)
    assert ours.returncode == 0 and ours.stderr == "", ours.stderr
    for java in (run_mqadmin(c.namesrv_addr, *args, version="5.3.3"), run_mqadmin(c, *args)):
        assert java_ok(java), java.stdout + java.stderr
        a, b = _runtime(java.stdout), _runtime(ours.stdout)
        assert list(a) == list(b)
        for key in a:
            if key.split()[-1] in STABLE_RUNTIME_KEYS:
                assert a[key] == b[key], key


#: Commands about a consumer running on the 4.9.7 cluster, as V4_COMMANDS ("5", "4"). 5.3.3's
#: cloneGroupOffset fails against 4.9.7 (GET_TOPIC_CONFIG); rmqadmin's prints 4.9.7's text.
#: resetOffsetByTime prints 5.3.3's first line ("start reset consumer offset ..."), 4.9.7's says
#: "rollback consumer offset ...".
V4_CONSUMER_COMMANDS: list[tuple[str, Callable[[Any, V4Consumer], list[str]], Callable[[str], str], str]] = [
    ("consumerConnection", lambda c, v: ["consumerConnection", "-g", v.group], norm_times, "54"),
    ("consumerStatus", lambda c, v: ["consumerStatus", "-g", v.group], norm_times, "54"),
    ("statsAll -t", lambda c, v: ["statsAll", "-t", v.scenario.topic], norm_rates, "54"),
    ("resetOffsetByTime", lambda c, v: ["resetOffsetByTime", "-g", v.group, "-t", v.scenario.topic,
                                        "-s", "0"], norm_times, "5"),
    ("cloneGroupOffset", lambda c, v: ["cloneGroupOffset", "-s", v.group, "-d", f"{v.group}_clone",
                                       "-t", v.scenario.topic], norm_times, "4"),
]


@pytest.mark.slow
@pytest.mark.parametrize("name,make_args,normalise,against", V4_CONSUMER_COMMANDS,
                         ids=[c[0] for c in V4_CONSUMER_COMMANDS])
def test_v4_consumer_commands(reference_cluster_v4: Any, v4_consumer: V4Consumer, tmp_path: Path,
                              name: str, make_args: Any, normalise: Any, against: str) -> None:
    args = make_args(reference_cluster_v4, v4_consumer)
    # the two resets change offsets: run once; the others only read
    retried(lambda: compare_on_v4(reference_cluster_v4, args, normalise, against, tmp_path, quiet=True),
            attempts=1 if name in ("resetOffsetByTime", "cloneGroupOffset") else 3)


@pytest.mark.slow
def test_v4_cluster_resend(reference_cluster_v4: Any, tmp_path: Path) -> None:
    """queryMsgById -s true against 4.9.7: rmqadmin prints what 5.3.3's mqadmin prints, which is
    4.9.7's text plus SendResult's recallHandle (new in 5.x). 4.9.7's mqadmin has no -t and finds
    the message by offset id only."""
    c = reference_cluster_v4
    topic, uniq, offset_id = _resend_topic(c)
    args = ("queryMsgById", "-t", topic, "-i", offset_id, "-s", "true")
    java5 = run_mqadmin(c.namesrv_addr, *args, version="5.3.3")
    java4 = run_mqadmin(c, "queryMsgById", "-i", offset_id, "-s", "true")  # 4.9.7: no -t
    ours = rmqadmin(c.namesrv_addr, *args, cwd=tmp_path)
    assert java_ok(java5) and java_ok(java4), java5.stdout + java4.stdout + java4.stderr
    assert ours.returncode == 0 and ours.stderr == "", ours.stderr
    same_output(java5.stdout, ours.stdout, norm_resend)
    assert ours.stdout.endswith(", recallHandle=null]")
    same_output(java4.stdout, ours.stdout.replace(", recallHandle=null]", "]"), norm_resend)
    for text in (java5.stdout, java4.stdout, ours.stdout):
        _assert_resent(c, topic, uniq, text)


#: Mutating commands against 4.9.7: 5.3.3's mqadmin changes twin A, rmqadmin twin B, 4.9.7's
#: mqadmin twin C ("twin": A and B print the same text, and C too where marked "54"); 4.9.7's
#: mqadmin then reads A, B and C back ("read": equal); "same": the three run the same command. 4.9.7's own text differs for updateTopic
#: (no line break after what it prints; TopicConfig without attributes), updateTopicPerm -b (the
#: same TopicConfig), updateSubGroup (its SubscriptionGroupConfig.toString) and deleteSubGroup (it
#: always deletes the group's %RETRY% and %DLQ% topics, 5.3.3 with -r true).
V4_MUTATING: list[tuple[str, list[str], str]] = [
    ("twin", ["updateTopic", "-c", "{c}", "-t", "{t}", "-r", "3", "-w", "5"], "5"),
    ("read", ["topicRoute", "-t", "{t}", "-l"], "54"),
    ("twin", ["updateTopic", "-b", "{b}", "-t", "{t}", "-o", "true", "-w", "1", "-r", "1"], "5"),
    ("twin", ["updateOrderConf", "-t", "{t}", "-m", "get"], "54"),
    ("twin", ["updateTopicPerm", "-c", "{c}", "-t", "{t}", "-p", "4"], "54"),
    ("read", ["topicRoute", "-t", "{t}", "-l"], "54"),
    ("twin", ["updateTopicPerm", "-b", "{b}", "-t", "{t}", "-p", "6"], "5"),
    ("twin", ["updateOrderConf", "-t", "{t}", "-m", "put", "-v", "{bn}:4"], "54"),
    ("read", ["updateOrderConf", "-t", "{t}", "-m", "get"], "54"),
    ("twin", ["updateOrderConf", "-t", "{t}", "-m", "delete"], "54"),
    ("twin", ["sendMessage", "-t", "{t}", "-p", "hello", "-k", "k", "-c", "TagS", "-b", "{bn}", "-i",
              "0"], "54"),
    ("read", ["printMsgByQueue", "-t", "{t}", "-a", "{bn}", "-i", "0"], "54"),
    ("twin", ["updateSubGroup", "-c", "{c}", "-g", "{g}", "-r", "5", "-q", "2"], "5"),
    ("read", ["getConsumerConfig", "-g", "{g}"], "54"),
    ("twin", ["deleteSubGroup", "-c", "{c}", "-g", "{g}"], "5"),
    ("twin", ["updateKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "{t}", "-v", "broker-x:3"], "54"),
    ("read", ["updateOrderConf", "-t", "{t}", "-m", "get"], "54"),
    ("twin", ["deleteKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "{t}"], "54"),
    ("twin", ["deleteTopic", "-t", "{t}", "-c", "{c}"], "54"),
    ("same", ["updateNamesrvConfig", "-k", "clusterTest", "-v", "false"], "54"),
    ("same", ["updateBrokerConfig", "-b", "{b}", "-k", "flushIntervalCommitLog", "-v", "600"], "54"),
    ("same", ["updateBrokerConfig", "-c", "{c}", "-k", "flushIntervalCommitLog", "-v", "600"], "54"),
    ("same", ["wipeWritePerm", "-b", "{bn}"], "54"),
    ("same", ["addWritePerm", "-b", "{bn}"], "54"),
    ("same", ["cleanExpiredCQ", "-c", "{c}"], "54"),
    ("same", ["deleteExpiredCommitLog", "-b", "{b}"], "54"),
]


@pytest.mark.slow
def test_v4_cluster_mutating_commands(reference_cluster_v4: Any, tmp_path: Path) -> None:
    c = reference_cluster_v4
    s = uuid.uuid4().hex[:6]
    names = {twin: (f"RmqadminV4T{s}{twin}", f"RmqadminV4G{s}{twin}") for twin in "ABC"}

    def fill(args: list[str], twin: str) -> list[str]:
        t, g = names[twin]
        values = {"{t}": t, "{g}": g, "{c}": c.cluster_name, "{b}": c.broker_addr}
        return [values.get(a, a).replace("{bn}", c.broker_name) for a in args]

    def as_a(text: str) -> str:
        for twin in "BC":
            for name, base in zip(names[twin], names["A"], strict=True):
                text = text.replace(name, base)
        return norm_times(re.sub(r"\b[0-9A-F]{32,}\b", "<id>", text))

    differences = []
    for mode, args, against in V4_MUTATING:
        if mode == "read":
            runs = [run_mqadmin(c, *fill(args, twin)) for twin in "ABC"]
        else:
            twins = "AAA" if mode == "same" else "ABC"
            runs = [run_mqadmin(c.namesrv_addr, *fill(args, twins[0]), version="5.3.3"),
                    rmqadmin(c.namesrv_addr, *fill(args, twins[1]), cwd=tmp_path),
                    run_mqadmin(c, *fill(args, twins[2]))]
            assert runs[1].returncode == 0 and runs[1].stderr == "", (args, runs[1].stderr)
        for run in (runs[0], runs[2]):
            assert java_ok(run), run.stdout + run.stderr  # type: ignore[arg-type]
        texts = [as_a(run.stdout) for run in runs][:2 if against == "5" else 3]
        if len(set(texts)) != 1:
            differences.append((mode, args, texts))
    assert not differences, "\n".join(f"{m} {a}: {x}" for m, a, x in differences)
    topics = run_mqadmin(c, "topicList").check().stdout.split()
    assert not {names[twin][0] for twin in "ABC"} & set(topics)
    config = run_mqadmin(c, "getBrokerConfig", "-b", c.broker_addr).check().stdout
    assert re.search(r"^flushIntervalCommitLog\s+=  600$", config, re.M)
    route = run_mqadmin(c, "topicRoute", "-t", "TBW102", "-l").check().stdout
    # write perm back: 6 as addWritePerm sets it, or the broker's own 7 once its next registration
    # after deleteTopic (a new topic-config data version) has replaced the NameServer's queue data
    perm = int(route.splitlines()[1].split()[-1])
    assert perm in (6, 7), route


# ---- rmqwire's own NameServer (an official broker registers with it) ------------------------------


@pytest.fixture(scope="module")
def rmqwire_namesrv(reference_unavailable: Any) -> Iterator[Any]:
    """rmqwire's NameServer (``python -m rmqwire namesrv``) with one official 5.3.3 broker."""
    from tools.reference.jars import ReferenceUnavailable
    from tools.rmqwire_process import BrokersOnNamesrv, RmqwireNamesrv

    ns = RmqwireNamesrv({}).start()
    cluster = BrokersOnNamesrv(namesrv_addrs=(ns.addr,), version="5.3.3")
    try:
        cluster.start()
    except ReferenceUnavailable as e:
        ns.close()
        reference_unavailable(str(e))
    except BaseException:
        ns.close()
        raise
    try:
        yield cluster
    finally:
        try:
            cluster.stop()
        finally:
            ns.stop()
            ns.close()


NAMESRV_COMMANDS: list[tuple[str, list[str], Callable[[str], str]]] = [
    ("clusterList", ["clusterList"], norm_rates),
    ("topicList", ["topicList"], norm_times),
    ("topicRoute", ["topicRoute", "-t", "TBW102"], norm_times),
    ("topicRoute -l", ["topicRoute", "-t", "TBW102", "-l"], norm_times),
    ("topicClusterList", ["topicClusterList", "-t", "TBW102"], norm_times),
    ("getNamesrvConfig", ["getNamesrvConfig"], norm_times),
]


@pytest.mark.parametrize("name,args,normalise", NAMESRV_COMMANDS, ids=[c[0] for c in NAMESRV_COMMANDS])
def test_against_rmqwire_namesrv(rmqwire_namesrv: Any, tmp_path: Path, name: str, args: list[str],
                                 normalise: Any) -> None:
    java = run_mqadmin(rmqwire_namesrv.namesrv_addr, *args)
    ours = rmqadmin(rmqwire_namesrv.namesrv_addr, *args, cwd=tmp_path)
    assert java_ok(java), java.stdout + java.stderr
    assert ours.returncode == 0, ours.stderr
    same_output(java.stdout, ours.stdout, normalise)


def test_kv_and_write_perm_on_rmqwire_namesrv(rmqwire_namesrv: Any, tmp_path: Path) -> None:
    ns = rmqwire_namesrv.namesrv_addr
    a, b = _twins("RmqwireNsKv")
    for args in (["updateKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "{}", "-v", "b:1"],
                 ["updateOrderConf", "-t", "{}", "-m", "get"],
                 ["deleteKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "{}"]):
        java = run_mqadmin(ns, *[x.replace("{}", a) for x in args])
        ours = rmqadmin(ns, *[x.replace("{}", b) for x in args], cwd=tmp_path)
        assert java_ok(java) and ours.returncode == 0, ours.stderr
        assert ours.stdout.replace(b, a) == java.stdout
    name = rmqwire_namesrv.brokers[0].name
    try:
        wipe = rmqadmin(ns, "wipeWritePerm", "-b", name)
        assert wipe.returncode == 0 and "OK" in wipe.stdout, wipe.stderr
        assert run_mqadmin(ns, "wipeWritePerm", "-b", name).stdout == wipe.stdout
    finally:
        add = rmqadmin(ns, "addWritePerm", "-b", name)
    assert add.returncode == 0 and run_mqadmin(ns, "addWritePerm", "-b", name).stdout == add.stdout
