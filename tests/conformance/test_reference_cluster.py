"""The official Apache RocketMQ reference cluster itself: it starts, our codec can talk to it, mqadmin
works against it, more brokers join, and stopping it leaves no JVM behind.

The parser tests at the end run on output captured from the official mqadmin (5.3.3 and 4.9.7) and
benchmark (rocketmq-example 5.5.0) and need no JVM.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from pathlib import Path

import pytest

from rmqwire.codec import RequestCode, ResponseCode
from tools.peers.topics import create_topic
from tools.reference import jars
from tools.reference.benchmark import (
    ConsumerReport,
    ProducerSummary,
    ensure_benchmark_jars,
    parse_consumer_reports,
    parse_producer_summary,
    run_producer,
    start_consumer,
)
from tools.reference.cluster import pid_alive
from tools.reference.jars import ReferenceUnavailable
from tools.reference.mqadmin import (
    ClusterListRow,
    parse_cluster_list,
    parse_topic_list,
    parse_topic_route,
    parse_topic_status,
    parse_update_topic,
    run_mqadmin,
)
from tools.reference.wire import get_cluster_info, get_route_info, loads_fastjson, request

pytestmark = pytest.mark.conformance

PERM_RW = 6


def wait_until(cond, timeout: float, what: str, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


# --------------------------------------------------------------------------- live cluster

def test_broker_visible_in_cluster_info_via_our_codec(reference_cluster):
    info = get_cluster_info(reference_cluster.namesrv_addr)
    assert info.master_addr(reference_cluster.broker_name) == reference_cluster.broker_addr
    assert reference_cluster.broker_name in info.clusters[reference_cluster.cluster_name]
    assert reference_cluster.broker_addr.startswith("127.0.0.1:")


def test_mqadmin_cluster_list_lists_the_broker(reference_cluster):
    result = run_mqadmin(reference_cluster, "clusterList").check()
    rows = parse_cluster_list(result.stdout)
    expected_version = "V" + reference_cluster.version.replace(".", "_")
    assert ClusterListRow(reference_cluster.cluster_name, reference_cluster.broker_name, 0,
                          reference_cluster.broker_addr, expected_version) in rows


def test_mqadmin_update_topic_then_route_via_our_codec(reference_cluster):
    topic = f"RefTopic_{uuid.uuid4().hex[:8]}"
    assert get_route_info(reference_cluster.namesrv_addr, topic) is None
    result = run_mqadmin(reference_cluster, "updateTopic", "-b", reference_cluster.broker_addr,
                         "-t", topic, "-r", "3", "-w", "5").check()
    created = parse_update_topic(result.stdout)
    assert created.broker_addrs == (reference_cluster.broker_addr,)
    assert created.topic_config["topicName"] == topic
    assert created.topic_config["readQueueNums"] == "3"

    # The broker registers the new topic with the NameServer right after creating it.
    route = wait_until(lambda: get_route_info(reference_cluster.namesrv_addr, topic), 30,
                       f"route of {topic}")
    assert [(q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm) for q in route.queue_datas] == [
        (reference_cluster.broker_name, 3, 5, PERM_RW)]
    assert {bd.broker_name: bd.broker_addrs for bd in route.broker_datas} == {
        reference_cluster.broker_name: {0: reference_cluster.broker_addr}}

    status = parse_topic_status(run_mqadmin(reference_cluster, "topicStatus", "-t", topic).check().stdout)
    assert sorted((r.broker_name, r.queue_id, r.max_offset) for r in status) == [
        (reference_cluster.broker_name, qid, 0) for qid in range(5)]


def test_mqadmin_failure_is_detected(reference_cluster):
    result = run_mqadmin(reference_cluster, "topicRoute", "-t", f"Missing_{uuid.uuid4().hex[:8]}")
    assert result.returncode == 0       # mqadmin exits 0 even when the command failed ...
    assert not result.ok                # ... so failure comes from its output
    assert "No topic route info" in result.stdout + result.stderr


def test_add_broker_then_stop_leaves_no_jvm(reference_cluster_factory):
    cluster = reference_cluster_factory()
    second = cluster.add_broker("broker-b")
    info = wait_until(
        lambda: (i := get_cluster_info(cluster.namesrv_addr)) and len(i.broker_addrs) == 2 and i, 30,
        "two brokers in GET_BROKER_CLUSTER_INFO")
    assert info.master_addr("broker-a") == cluster.broker_addr
    assert info.master_addr("broker-b") == second.addr != cluster.broker_addr
    assert info.clusters[cluster.cluster_name] == {"broker-a", "broker-b"}

    pids = cluster.pids
    root = cluster.home.parent
    assert len(pids) == 3 and all(pid_alive(p) for p in pids)
    cluster.stop()
    assert [p for p in pids if pid_alive(p)] == []
    assert not root.exists()
    assert _jvms_under(root) == []


def _jvms_under(root: Path) -> list[int]:
    """PIDs of any java process whose command line mentions ``root`` (scan of /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                continue
            if b"java" in cmdline and str(root).encode() in cmdline and pid_alive(int(entry.name)):
                found.append(int(entry.name))
    return found


# --------------------------------------------------------------------------- container backend

@pytest.mark.docker
def test_docker_backend_cluster_info(docker_reference_cluster):
    cluster = docker_reference_cluster
    info = get_cluster_info(cluster.namesrv_addr)
    assert info.master_addr(cluster.broker_name) == cluster.broker_addr
    assert cluster.broker_addr.startswith("127.0.0.1:")
    # Host networking on loopback: nothing is mapped, the servers bind the host's 127.0.0.1.
    for container in cluster.containers:
        attrs = container.get_wrapped_container().attrs
        assert attrs["HostConfig"]["NetworkMode"] == "host"
        assert attrs["Config"]["Image"] == cluster.image.tag
        assert attrs["Config"]["Labels"]["org.rmqwire.owner-pid"] == str(os.getpid())


@pytest.mark.docker
def test_docker_image_layout_and_cache(docker_reference_cluster):
    """The image is laid out as the official one (ROCKETMQ_HOME, lib, user rocketmq); a second
    ensure_image finds it instead of building it again."""
    from tools.reference.image import ensure_image, rocketmq_home

    cluster = docker_reference_cluster
    home = rocketmq_home(cluster.version)
    assert cluster.image.rocketmq_home == home == f"/home/rocketmq/rocketmq-{cluster.version}"
    code, out = cluster.containers[-1].exec(
        ["sh", "-c", f'id -un; echo "$ROCKETMQ_HOME"; ls {home}/lib'])
    assert code == 0, out
    user, env_home, *jars_in_image = out.decode().split()
    assert (user, env_home) == ("rocketmq", home)
    assert f"rocketmq-broker-{cluster.version}.jar" in jars_in_image
    assert f"rocketmq-namesrv-{cluster.version}.jar" in jars_in_image

    again = ensure_image(cluster.version, log=lambda _msg: None)
    assert again.tag == cluster.image.tag
    assert again.how in ("present", "cached")


@pytest.mark.docker
def test_docker_backend_removes_its_containers_when_the_body_fails(docker_reference_cluster):
    """A cluster whose user fails is still removed (the fixture's try/finally runs the same stop())."""
    import docker

    from tools.reference.docker_cluster import DockerReferenceCluster

    ids: list[str] = []
    with pytest.raises(RuntimeError, match="the test body failed"):
        with DockerReferenceCluster(version=docker_reference_cluster.version) as cluster:
            ids = [c.get_container_id() for c in cluster.containers]
            assert len(ids) == 2 and get_cluster_info(cluster.namesrv_addr).master_addr("broker-a")
            raise RuntimeError("the test body failed")
    client = docker.from_env()
    try:
        for cid in ids:
            with pytest.raises(docker.errors.NotFound):
                client.containers.get(cid)
    finally:
        client.close()


@pytest.mark.docker
def test_docker_orphan_containers_are_removed(docker_reference_cluster):
    """A container whose owner process died without stop() goes at the next start (remove_orphans)."""
    import subprocess

    import docker

    from tools.reference.docker_cluster import LABEL_HOST, LABEL_OWNER, LABEL_ROLE, remove_orphans

    dead = subprocess.Popen(["true"])
    dead.wait()
    assert not pid_alive(dead.pid)
    client = docker.from_env()
    try:
        orphan = client.containers.create(
            docker_reference_cluster.image.tag, ["sleep", "600"], network_mode="host",
            labels={LABEL_ROLE: "test", LABEL_OWNER: str(dead.pid), LABEL_HOST: socket.gethostname()})
        try:
            orphan.start()
            removed = remove_orphans()
            assert orphan.id in [c.id for c in removed]
            with pytest.raises(docker.errors.NotFound):
                client.containers.get(orphan.id)
            # The session's own containers belong to a live process and stay.
            for container in docker_reference_cluster.containers:
                client.containers.get(container.get_container_id())
        finally:
            try:
                orphan.remove(force=True)
            except docker.errors.NotFound:
                pass
    finally:
        client.close()


@pytest.mark.slow
def test_reference_4x_cluster(reference_cluster_v4):
    assert reference_cluster_v4.version.startswith("4.")
    info = get_cluster_info(reference_cluster_v4.namesrv_addr)
    assert info.master_addr(reference_cluster_v4.broker_name) == reference_cluster_v4.broker_addr
    rows = parse_cluster_list(run_mqadmin(reference_cluster_v4, "clusterList").check().stdout)
    assert [(r.broker_name, r.addr, r.version) for r in rows] == [
        (reference_cluster_v4.broker_name, reference_cluster_v4.broker_addr,
         "V" + reference_cluster_v4.version.replace(".", "_"))]


@pytest.mark.slow
def test_4_9_8_server_jars_are_reported_unavailable(reference_unavailable):
    """Maven Central lacks rocketmq-namesrv/-broker 4.9.8; the harness must say so, not fail obscurely."""
    if jars.lib_dir("4.9.8").joinpath(".resolved").exists():
        pytest.fail("4.9.8 resolved: Central now has the server jars, make it the 4.x reference")
    try:
        jars.ensure_jars("4.9.8")
    except ReferenceUnavailable as exc:
        if "Maven (mvn) is not installed" in str(exc):
            reference_unavailable(str(exc))  # fails under CI=true
        assert "rocketmq-broker:jar:4.9.8" in str(exc)
        assert "rocketmq-namesrv:jar:4.9.8" in str(exc)
    else:
        pytest.fail("4.9.8 resolved: Central now has the server jars, make it the 4.x reference")


BENCH_MESSAGES = 2000
BENCH_QUEUES = 4


def _max_offsets(broker_addr: str, topic: str, queues: int) -> list[int]:
    offsets = []
    for q in range(queues):
        reply = request(broker_addr, RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": str(q)})
        assert reply.code == ResponseCode.SUCCESS, reply.remark
        offsets.append(int((reply.ext_fields or {})["offset"]))
    return offsets


def _committed_offsets(broker_addr: str, group: str, topic: str, queues: int) -> list[int | None]:
    """The group's offsets as the broker holds them (None: none committed for that queue yet)."""
    offsets: list[int | None] = []
    for q in range(queues):
        reply = request(broker_addr, RequestCode.QUERY_CONSUMER_OFFSET,
                        {"consumerGroup": group, "topic": topic, "queueId": str(q),
                         "setZeroIfNotFound": "false"})
        if reply.code == ResponseCode.QUERY_NOT_FOUND:
            offsets.append(None)
            continue
        assert reply.code == ResponseCode.SUCCESS, reply.remark
        offsets.append(int((reply.ext_fields or {})["offset"]))
    return offsets


def _start_group_at_zero(broker_addr: str, group: str, topic: str, queues: int) -> None:
    """Create the group and commit offset 0 on every queue, so the consumer reads from the start.

    Without it a new group's start is the broker's call: offset 0 only if the first message is
    still in the page cache (checkInMemByConsumeOffset), else the queue's end, so under load the
    benchmark consumer may skip every message produced before it started.
    """
    reply = request(broker_addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                    body=json.dumps({"groupName": group}).encode())
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    for q in range(queues):
        reply = request(broker_addr, RequestCode.UPDATE_CONSUMER_OFFSET,
                        {"consumerGroup": group, "topic": topic, "queueId": str(q), "commitOffset": "0"})
        assert reply.code == ResponseCode.SUCCESS, reply.remark
    assert _committed_offsets(broker_addr, group, topic, queues) == [0] * queues


@pytest.mark.slow
def test_official_benchmark_producer_and_consumer(reference_cluster, reference_unavailable):
    """The official benchmark Producer sends N messages; the official benchmark Consumer consumes
    all of them: the group's committed offsets (read through our codec) reach the queues' ends,
    which sum to N. Waits on that condition, not on a time window."""
    broker = reference_cluster.broker_addr
    topic = f"Bench_{uuid.uuid4().hex[:8]}"
    group = f"G_{topic}"
    try:
        ensure_benchmark_jars()
    except ReferenceUnavailable as exc:
        reference_unavailable(str(exc))
    create_topic(broker, topic, queues=BENCH_QUEUES, namesrv_addr=reference_cluster.namesrv_addr)

    produced = run_producer(reference_cluster.namesrv_addr, "-t", topic, "-w", "2", "-s", "128",
                            "-q", str(BENCH_MESSAGES))
    assert produced.returncode == 0 and not produced.timed_out, produced.output[-2000:]
    summary = parse_producer_summary(produced.output)
    assert (summary.send_total, summary.send_failed, summary.response_failed) == (BENCH_MESSAGES, 0, 0)
    ends = _max_offsets(broker, topic, BENCH_QUEUES)
    assert sum(ends) == BENCH_MESSAGES

    _start_group_at_zero(broker, group, topic, BENCH_QUEUES)
    with start_consumer(reference_cluster.namesrv_addr, "-t", topic, "-g", group, "-w", "2",
                        "-ri", "1000") as consumer:
        def consumed_all() -> bool:
            assert consumer.alive(), f"benchmark Consumer exited:\n{consumer.output()[-2000:]}"
            return _committed_offsets(broker, group, topic, BENCH_QUEUES) == ends

        # The consumer commits its offsets every 5 s (persistConsumerOffsetInterval).
        wait_until(consumed_all, 240, f"group {group} to commit offsets {ends}")
        # Its first report comes once it has 10 one-second snapshots; the parser must read it.
        wait_until(consumer.reports, 120, "a Consume TPS report from the benchmark Consumer")
        output = consumer.output()
    assert "Consumer Started." in output
    assert all(r.consume_fail == 0 for r in parse_consumer_reports(output)), output[-2000:]


# --------------------------------------------------------------------------- parsers (captured output)

CLUSTER_LIST_533 = """\
#Cluster Name           #Broker Name            #BID  #Addr                  #Version              #InTPS(LOAD)                   #OutTPS(LOAD)  #Timer(Progress)        #PCWait(ms)  #Hour         #SPACE    #ACTIVATED
DefaultCluster          broker-a                0     127.0.0.1:24752        V5_3_3                 0.00(0,0ms)               0.00(0,0ms|0,0ms)  0-0(0.0w, 0.0, 0.0)               0  498690.82     0.1300          true
"""
CLUSTER_LIST_497 = """\
#Cluster Name     #Broker Name            #BID  #Addr                  #Version                #InTPS(LOAD)       #OutTPS(LOAD) #PCWait(ms) #Hour #SPACE
DefaultCluster    broker-a                0     127.0.0.1:20609        V4_9_7                   0.00(0,0ms)         0.00(0,0ms)          0 498690.84 0.1300
"""


@pytest.mark.parametrize("text,version,addr", [(CLUSTER_LIST_533, "V5_3_3", "127.0.0.1:24752"),
                                              (CLUSTER_LIST_497, "V4_9_7", "127.0.0.1:20609")])
def test_parse_cluster_list(text, version, addr):
    assert parse_cluster_list(text) == [ClusterListRow("DefaultCluster", "broker-a", 0, addr, version)]


def test_parse_topic_list():
    assert parse_topic_list("TBW102\nT1\n\nbroker-a\n") == ["TBW102", "T1", "broker-a"]


def test_parse_topic_route_fastjson_keys():
    text = ('{\n\t"brokerDatas":[\n\t\t{\n\t\t\t"brokerAddrs":{0:"127.0.0.1:24752"\n\t\t\t},\n'
            '\t\t\t"brokerName":"broker-a",\n\t\t\t"cluster":"DefaultCluster"\n\t\t}\n\t],\n'
            '\t"filterServerTable":{},\n\t"queueDatas":[\n\t\t{\n\t\t\t"brokerName":"broker-a",\n'
            '\t\t\t"perm":6,\n\t\t\t"readQueueNums":4,\n\t\t\t"topicSysFlag":0,\n\t\t\t"writeQueueNums":4\n'
            '\t\t}\n\t]\n}\n')
    route = parse_topic_route(text)
    assert route["brokerDatas"][0]["brokerAddrs"] == {0: "127.0.0.1:24752"}
    assert route["queueDatas"][0]["writeQueueNums"] == 4


def test_loads_fastjson_gives_plain_values_with_int_keys():
    text = '{"a":{0:"x",-3:"y"},"s":"{7:8}","l":[{12 :{}}]}'
    assert loads_fastjson(text) == {"a": {0: "x", -3: "y"}, "s": "{7:8}", "l": [{12: {}}]}


def test_parse_topic_status_and_update_topic():
    status = parse_topic_status(
        "#Broker Name                      #QID  #Min Offset           #Max Offset             #Last Updated\n"
        "broker-a                          0     0                     7                       2026-11-22 02:48:10,123\n"
        "broker-a                          1     2                     9                       \n\nTopic Put TPS: 0.0\n")
    assert [(r.broker_name, r.queue_id, r.min_offset, r.max_offset) for r in status] == [
        ("broker-a", 0, 0, 7), ("broker-a", 1, 2, 9)]
    assert status[0].last_updated == "2026-11-22 02:48:10,123"
    created = parse_update_topic(
        "create topic to 127.0.0.1:24752 success.\nTopicConfig [topicName=T1, readQueueNums=4, "
        "writeQueueNums=4, perm=RW-, topicFilterType=SINGLE_TAG, topicSysFlag=0, order=false, attributes={}]\n")
    assert created.broker_addrs == ("127.0.0.1:24752",)
    assert created.topic_config["perm"] == "RW-" and created.topic_config["attributes"] == "{}"


def test_parse_benchmark_output():
    out = ("Current Time: 2026-11-21 18:58:15,521 | Send TPS: 1191 | Max RT(ms): 1419 | Average RT(ms):   3.481 "
           "| Send Failed: 0 | Response Failed: 0\n"
           "[Complete] Send Total: 20000 | Send TPS: 2015 | Max RT(ms): 1419 | Average RT(ms):   1.971 "
           "| Send Failed: 0 | Response Failed: 0\n")
    assert parse_producer_summary(out) == ProducerSummary(20000, 2015, 1419, 1.971, 0, 0)
    assert parse_producer_summary("[Complete] Send Total: 10 Send Failed: 1 Response Failed: 2") == \
        ProducerSummary(10, None, None, None, 1, 2)
    with pytest.raises(ValueError):
        parse_producer_summary("Consumer Started.")
    reports = parse_consumer_reports(
        "Consumer Started.\nCurrent Time: x | Consume TPS: 2223 | AVG(B2C) RT(ms): 11620.615 | AVG(S2C) RT(ms): "
        "11619.753 | MAX(B2C) RT(ms): 17884 | MAX(S2C) RT(ms): 17763 | Consume Fail: 0\n"
        "Current Time: y | Consume TPS: 0 | AVG(B2C) RT(ms):     NaN | AVG(S2C) RT(ms):     NaN | "
        "MAX(B2C) RT(ms): 0 | MAX(S2C) RT(ms): 0 | Consume Fail: 3\n")
    assert reports == [ConsumerReport(2223, 11620.615, 11619.753, 0), ConsumerReport(0, None, None, 3)]
