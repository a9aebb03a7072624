"""Spark reads and writes RocketMQ through rmqwire.spark, against the official 5.3.3 broker and
the official Java client (producer and consumer), on ``local[2]`` and on a Spark standalone
cluster (master and worker started from the installed pyspark, executors in their own JVMs).

Spark JVMs are heavy on the shared 2-core machine: one SparkSession serves the module; the jobs
of spark/jobs run as child processes (one for the kill -9 / restart, one on the standalone
cluster), each in its own process group that the test kills at the end.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pyspark = pytest.importorskip("pyspark", reason="the spark extra (pyspark) is not installed")

from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from rmqwire import Message, Producer  # noqa: E402
from rmqwire.model import MessageQueue  # noqa: E402
from rmqwire.spark import RocketMQDataSource  # noqa: E402
from tools.peers.java_peer import JavaPeer  # noqa: E402
from tools.peers.records import ReceivedRecord, SentRecord  # noqa: E402
from tools.peers.topics import create_topic  # noqa: E402
from tools.reference.mqadmin import run_mqadmin  # noqa: E402

pytestmark = pytest.mark.conformance

ROOT = Path(__file__).resolve().parents[2]
JOBS = ROOT / "spark" / "jobs"
SPARK_HOME = Path(pyspark.__file__).resolve().parent
#: Spark JVMs start slowly on the loaded machine (a minute is common).
JOB_TIMEOUT = 600.0
#: Starts of a streaming query whose driver-side Python worker missed Spark's 10 s connect-back.
START_ATTEMPTS = 5
COLS = ["topic", "brokerName", "queueId", "queueOffset", "msgId", "offsetMsgId", "tags", "keys", "body",
        "properties", "reconsumeTimes", "sysFlag", "bornHost", "storeHost"]


def uid(tag: str) -> str:
    return f"rmqwire_spark_{tag}_{uuid.uuid4().hex[:8]}"


def wait_until(cond: Callable[[], Any], timeout: float, what: str, interval: float = 0.5) -> Any:
    end = time.monotonic() + timeout
    while True:
        result = cond()
        if result:
            return result
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def child_env() -> dict[str, str]:
    """Spark's Python workers must run this interpreter with this tree on the path."""
    env = dict(os.environ)
    env["PYSPARK_PYTHON"] = sys.executable
    # spark/worker_site: workers import the compiled pyspark, not pyspark.zip (see its docstring)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "spark" / "worker_site"),
                                         env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    return env


def stop_group(proc: subprocess.Popen[Any], sig: int = signal.SIGTERM, wait: float = 30.0) -> None:
    """Stop a child started with ``start_new_session`` and everything it started (JVMs, Python
    workers, executors)."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, sig)
            proc.wait(wait)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # whatever is left of the group
    except ProcessLookupError:
        pass
    proc.wait(30)


def run_job(name: str, *args: str, timeout: float = JOB_TIMEOUT, log: Path) -> subprocess.CompletedProcess[str]:
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, str(JOBS / f"{name}.py"), *args], stdout=out,
                                stderr=subprocess.STDOUT, env=child_env(), start_new_session=True)
        try:
            proc.wait(timeout)
        finally:
            stop_group(proc)
    text = log.read_text()
    assert proc.returncode == 0, f"{name} failed ({proc.returncode}):\n{text[-4000:]}"
    return subprocess.CompletedProcess(proc.args, proc.returncode, text, "")


def start_query(make: Callable[[], Any]) -> Any:
    """Start a streaming query and wait for its first progress; start it again when Spark gave
    up on its driver-side Python process (Spark waits only 10 s for it to connect back, which a
    loaded machine can miss: nothing ran yet then)."""
    for attempt in range(START_ATTEMPTS):
        q = make()
        wait_until(lambda: q.recentProgress or not q.isActive, JOB_TIMEOUT, "the query's first batch")
        exc = None if q.isActive else q.exception()
        if exc is not None and "failed to connect back" in str(exc) and attempt < START_ATTEMPTS - 1:
            continue
        return q
    raise AssertionError("unreachable")


# ---- shared fixtures -------------------------------------------------------------------------------


def _kill_gateway() -> None:
    """Stop the py4j gateway JVM PySpark launched for this process (spark.stop() leaves it)."""
    from pyspark import SparkContext

    gw = SparkContext._gateway
    if gw is None:
        return
    proc = getattr(gw, "proc", None)
    try:
        gw.shutdown()
    except Exception:
        pass
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait(30)
    SparkContext._gateway = None
    SparkContext._jvm = None


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    os.environ.update({k: v for k, v in child_env().items() if k in ("PYSPARK_PYTHON", "SPARK_LOCAL_IP")})
    os.environ["PYTHONPATH"] = child_env()["PYTHONPATH"]
    s = (SparkSession.builder.master("local[2]").appName("rmqwire-spark-tests")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", "2").config("spark.driver.host", "127.0.0.1")
         .getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    s.dataSource.register(RocketMQDataSource)
    try:
        yield s
    finally:
        s.stop()
        _kill_gateway()


@pytest.fixture(scope="module")
def ns(reference_cluster: Any) -> str:
    return reference_cluster.namesrv_addr


@pytest.fixture(scope="module")
def java(ns: str) -> JavaPeer:
    return JavaPeer(ns)


@pytest.fixture(scope="module")
def producer(ns: str) -> Iterator[Producer]:
    with Producer(uid("producer"), namesrv_addr=ns) as p:
        yield p


class Filled:
    """A 4-queue topic the Java producer filled in two rounds, and what the Java consumer read."""

    def __init__(self, topic: str, first: list[SentRecord], second: list[SentRecord], between_ms: int,
                 received: list[ReceivedRecord]) -> None:
        self.topic, self.first, self.second, self.between_ms = topic, first, second, between_ms
        self.received = received


@pytest.fixture(scope="module")
def filled(reference_cluster: Any, java: JavaPeer, ns: str) -> Filled:
    topic = uid("filled")
    create_topic(reference_cluster.broker_addr, topic, queues=4, namesrv_addr=ns)
    # 40 single sends: tags, keys, non-ASCII properties, bodies over 4 KiB compressed by the client
    first = java.produce(topic, 40, tag="TagA", keys="ka{i} kb{i}", props={"p": "välue-{i}", "日本": "値{i}"},
                         body_size=6000, compress=True)
    time.sleep(0.05)  # store timestamps are milliseconds: keep the rounds apart
    between = int(time.time() * 1000)
    time.sleep(0.05)
    second = java.produce(topic, 12, mode="batch", tag="TagB", keys="b{i}", props={"q": "ü{i}"},
                          body="batch body {i}")
    received = java.consume(topic, 52, group=uid("javaref"))
    return Filled(topic, first, second, between, received)


def read(spark: SparkSession, ns: str, **options: str) -> Any:
    return spark.read.format("rocketmq").option("nameServer", ns).options(**options).load()


def rows_by_id(df: Any) -> dict[str, dict[str, Any]]:
    sel = df.select(*COLS, F.unix_millis("bornTimestamp").alias("born"),
                    F.unix_millis("storeTimestamp").alias("stored"))
    out: dict[str, dict[str, Any]] = {}
    for r in sel.collect():
        d = r.asDict()
        assert d["offsetMsgId"] not in out, f"message read twice: {d['offsetMsgId']}"
        out[d["offsetMsgId"]] = d
    return out


# ---- batch read ----------------------------------------------------------------------------------


def test_batch_read_gives_each_message_once_with_the_java_consumers_fields(
        spark: SparkSession, ns: str, filled: Filled) -> None:
    rows = rows_by_id(read(spark, ns, topic=filled.topic))
    assert len(rows) == 52 == len({r.offset_msg_id for r in filled.received})
    assert {r["queueId"] for r in rows.values()} == {0, 1, 2, 3}
    for j in filled.received:
        r = rows[j.offset_msg_id]
        assert j.queue is not None
        assert (r["topic"], r["brokerName"], r["queueId"], r["queueOffset"]) == (
            j.topic, j.queue.broker_name, j.queue.queue_id, j.queue_offset)
        assert (r["msgId"], r["tags"], r["keys"], bytes(r["body"])) == (j.msg_id, j.tags, j.keys, j.body)
        assert r["properties"] == j.user_properties
        assert (r["born"], r["stored"], r["reconsumeTimes"]) == (j.born_timestamp, j.store_timestamp, 0)
        assert (r["bornHost"], r["storeHost"]) == (j.born_host, j.store_host)
        assert r["sysFlag"] == j.sys_flag
    compressed = [r for r in rows.values() if r["tags"] == "TagA"]
    assert all(len(r["body"]) == 6000 for r in compressed)
    assert any("日本" in r["properties"] for r in compressed)


def test_offsets_and_timestamps_select_exactly_the_expected_rows(
        spark: SparkSession, ns: str, filled: Filled, reference_cluster: Any) -> None:
    broker, t = reference_cluster.broker_name, filled.topic
    all_rows = rows_by_id(read(spark, ns, topic=t)).values()
    start = {"0": 1, "1": -2, "2": 3}
    end = {"0": 4, "2": 3, "3": -1}
    got = read(spark, ns, topic=t, startingOffsets=json.dumps({t: {broker: start}}),
               endingOffsets=json.dumps({t: {broker: end}}))
    got_keys = sorted((r.queueId, r.queueOffset) for r in got.select("queueId", "queueOffset").collect())
    latest = {q: max(r["queueOffset"] for r in all_rows if r["queueId"] == q) + 1 for q in range(4)}
    want = sorted([(0, o) for o in range(1, 4)] + [(1, o) for o in range(latest[1])]
                  + [(3, o) for o in range(latest[3])])
    assert got_keys == want

    after = rows_by_id(read(spark, ns, topic=t, startingTimestamp=str(filled.between_ms)))
    before = rows_by_id(read(spark, ns, topic=t, endingTimestamp=str(filled.between_ms)))
    assert {r["tags"] for r in after.values()} == {"TagB"} and len(after) == 12
    assert {r["tags"] for r in before.values()} == {"TagA"} and len(before) == 40


def test_sub_expression_keeps_only_matching_tags(spark: SparkSession, ns: str, filled: Filled) -> None:
    rows = rows_by_id(read(spark, ns, topic=filled.topic, subExpression="TagB || TagC"))
    assert len(rows) == 12 and {r["tags"] for r in rows.values()} == {"TagB"}
    assert read(spark, ns, topic=filled.topic, subExpression="NoSuchTag").count() == 0


def test_bad_options_fail_with_a_reason(spark: SparkSession, ns: str, filled: Filled) -> None:
    with pytest.raises(Exception, match="commitOffsetsToGroup"):
        read(spark, ns, topic=filled.topic, group="g").count()
    with pytest.raises(Exception, match="No topic route|TOPIC_NOT_EXIST|cannot resolve"):
        read(spark, ns, topic=uid("missing")).count()


# ---- streaming -----------------------------------------------------------------------------------


def test_rate_limit_and_available_now_stop_at_the_snapshot(
        spark: SparkSession, ns: str, reference_cluster: Any, producer: Producer, tmp_path: Path) -> None:
    topic = uid("avail")
    create_topic(reference_cluster.broker_addr, topic, queues=4, namesrv_addr=ns)
    for i in range(200):
        producer.send(Message(topic, f"m{i}".encode(), tags="T"))
    sizes: list[int] = []
    late: list[str] = []

    def batch(df: Any, batch_id: int) -> None:
        sizes.append(df.count())
        if batch_id == 0:  # sent after the AvailableNow snapshot: not part of this run
            late.extend(producer.send(Message(topic, f"late{i}".encode())).msg_id for i in range(8))

    q = start_query(lambda: spark.readStream.format("rocketmq").option("nameServer", ns).option("topic", topic)
                    .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "40").load()
                    .writeStream.foreachBatch(batch).option("checkpointLocation", str(tmp_path / "ckpt"))
                    .trigger(availableNow=True).start())
    assert q.awaitTermination(JOB_TIMEOUT), "the AvailableNow query did not stop"
    assert q.exception() is None
    assert sum(sizes) == 200 and len(late) == 8
    assert max(sizes) <= 40 and len([s for s in sizes if s]) >= 5


def test_queues_added_while_streaming_are_read_from_their_start(
        spark: SparkSession, ns: str, reference_cluster: Any, producer: Producer, tmp_path: Path) -> None:
    topic = uid("grow")
    broker = reference_cluster.broker_name
    create_topic(reference_cluster.broker_addr, topic, queues=2, namesrv_addr=ns)
    for i in range(10):
        producer.send(Message(topic, f"old{i}".encode()))
    seen: list[tuple[int, int, str]] = []
    lock = threading.Lock()

    def batch(df: Any, _: int) -> None:
        got = [(r.queueId, r.queueOffset, bytes(r.body).decode()) for r in df.collect()]
        with lock:
            seen.extend(got)

    q = start_query(lambda: spark.readStream.format("rocketmq").option("nameServer", ns).option("topic", topic)
                    .option("startingOffsets", "earliest").load()
                    .writeStream.foreachBatch(batch).option("checkpointLocation", str(tmp_path / "ckpt"))
                    .trigger(processingTime="1 second").start())
    try:
        wait_until(lambda: len(seen) >= 10, JOB_TIMEOUT, "the first messages")
        create_topic(reference_cluster.broker_addr, topic, queues=4, namesrv_addr=ns)
        for qid in (2, 3):
            for i in range(5):
                producer.send(Message(topic, f"new{qid}-{i}".encode()), queue=MessageQueue(topic, broker, qid))
        wait_until(lambda: len(seen) >= 20, JOB_TIMEOUT, "the messages of the new queues")
    finally:
        q.stop()
    with lock:
        assert len(seen) == len(set(seen)) == 20
        assert sorted((qid, o) for qid, o, b in seen if b.startswith("new")) == [
            (qid, o) for qid in (2, 3) for o in range(5)]


def test_topic_to_parquet_killed_and_restarted_writes_each_message_once_and_commits_to_group(
        spark: SparkSession, ns: str, reference_cluster: Any, java: JavaPeer, tmp_path: Path) -> None:
    topic, group = uid("stream"), uid("progress")
    create_topic(reference_cluster.broker_addr, topic, queues=4, namesrv_addr=ns)
    out, ckpt = tmp_path / "table", tmp_path / "ckpt"
    base = ["-n", ns, "--master", "local[2]", "--topic", topic, "--output", str(out), "--checkpoint", str(ckpt),
            "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=2"]
    log = tmp_path / "run1.log"
    with log.open("w") as f:
        proc = subprocess.Popen([sys.executable, str(JOBS / "topic_to_parquet.py"), *base, "--trigger-seconds", "1",
                                 "--max-offsets-per-trigger", "100"], stdout=f, stderr=subprocess.STDOUT,
                                env=child_env(), start_new_session=True)
    sent: list[SentRecord] = []
    try:
        sending = threading.Thread(target=lambda: sent.extend(java.produce(topic, 600, body="s{i}", keys="k{i}")))
        sending.start()
        commits = ckpt / "commits"
        wait_until(lambda: commits.is_dir() and len(list(commits.glob("[0-9]*"))) >= 2 or proc.poll() is not None,
                   JOB_TIMEOUT, "two committed micro-batches")
        assert proc.poll() is None, log.read_text()[-4000:]
    finally:
        stop_group(proc, signal.SIGKILL)  # the driver (Python + JVM + workers) dies mid-run
    sending.join(JOB_TIMEOUT)
    sent.extend(java.produce(topic, 100, body="after{i}", keys="a{i}"))
    run_job("topic_to_parquet", *base, "--available-now", "--commit-to-group", group, log=tmp_path / "run2.log")

    table = spark.read.parquet(str(out))
    rows = table.select("offsetMsgId", "keys", "topic", "date").collect()
    assert len(rows) == 700
    assert {r.offsetMsgId for r in rows} == {s.offset_msg_id for s in sent}
    assert {r.topic for r in rows} == {topic} and all(r.date is not None for r in rows)

    progress = run_mqadmin(reference_cluster, "consumerProgress", "-g", group).check().stdout
    lines = [ln.split() for ln in progress.splitlines() if ln.startswith(topic)]
    assert len(lines) == 4, progress
    # columns: topic, broker, queue, broker offset, consumer offset, ...: the group is at the end
    assert all(ln[3] == ln[4] for ln in lines), progress
    assert sum(int(ln[4]) for ln in lines) == 700


# ---- sink ----------------------------------------------------------------------------------------


def test_sink_rows_reach_the_java_consumer_with_tags_keys_and_properties(
        spark: SparkSession, ns: str, reference_cluster: Any, java: JavaPeer) -> None:
    topic = uid("sink")
    create_topic(reference_cluster.broker_addr, topic, queues=4, namesrv_addr=ns)
    consumer = java.start_consumer(topic, 10_000, group=uid("sinkjava"), timeout_ms=int(JOB_TIMEOUT * 1000))
    consumer.wait_started()
    df = spark.range(10_000).select(
        F.concat(F.lit("body-"), F.col("id").cast("string")).alias("body"),
        F.when(F.col("id") % 2 == 0, F.lit("Even")).otherwise(F.lit("Odd")).alias("tags"),
        F.concat(F.lit("key-"), F.col("id").cast("string")).alias("keys"),
        F.create_map(F.lit("n"), F.col("id").cast("string"), F.lit("ü"), F.lit("wert")).alias("properties"))
    df.write.format("rocketmq").option("nameServer", ns).option("topic", topic).mode("append").save()
    got = consumer.finish()
    by_key = {r.keys: r for r in got}
    assert len(got) == len(by_key) == 10_000
    for i in (0, 1, 4321, 9999):
        r = by_key[f"key-{i}"]
        assert r.body == f"body-{i}".encode() and r.tags == ("Even" if i % 2 == 0 else "Odd")
        assert r.user_properties == {"n": str(i), "ü": "wert"}
    assert {r.queue.queue_id for r in got if r.queue} == {0, 1, 2, 3}


def test_sink_routes_rows_to_the_given_queue(spark: SparkSession, ns: str, reference_cluster: Any) -> None:
    topic, broker = uid("route"), reference_cluster.broker_name
    create_topic(reference_cluster.broker_addr, topic, queues=4, namesrv_addr=ns)
    df = spark.range(30).select(F.col("id").cast("string").alias("body"), F.lit(broker).alias("brokerName"),
                                (F.col("id") % 2 + 2).cast("int").alias("queueId"))
    df.write.format("rocketmq").option("nameServer", ns).option("topic", topic).mode("append").save()
    back = read(spark, ns, topic=topic).groupBy("queueId").count().collect()
    assert sorted((r.queueId, r["count"]) for r in back) == [(2, 15), (3, 15)]
    with pytest.raises(Exception, match="append"):
        df.write.format("rocketmq").option("nameServer", ns).option("topic", topic).mode("overwrite").save()


# ---- the batch jobs (run in this process, on the module's session) -------------------------------


def job(name: str) -> Any:
    sys.path.insert(0, str(JOBS))  # the jobs import their _common helper
    try:
        spec = importlib.util.spec_from_file_location(f"rmqwire_spark_job_{name}", JOBS / f"{name}.py")
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.remove(str(JOBS))


def test_topic_stats_counts_bytes_and_latency_per_tag(spark: SparkSession, ns: str, filled: Filled,
                                                      tmp_path: Path) -> None:
    stats = job("topic_stats")
    out = tmp_path / "stats"
    stats.run(spark, stats.parse(["-n", ns, "--topic", filled.topic, "--output", str(out)]))
    rows = spark.read.parquet(str(out)).groupBy("tags").agg(F.sum("messages").alias("n"), F.sum("bytes").alias("b"),
                                                             F.min("latency_avg_ms").alias("lat")).collect()
    got = {r.tags: (r.n, r.b) for r in rows}
    assert got == {"TagA": (40, 40 * 6000), "TagB": (12, sum(len(f"batch body {i}") for i in range(12)))}
    assert all(r.lat >= 0 for r in rows)


def test_replay_copies_a_time_range_to_another_topic(spark: SparkSession, ns: str, filled: Filled,
                                                     reference_cluster: Any) -> None:
    replay = job("replay")
    target = uid("replayed")
    create_topic(reference_cluster.broker_addr, target, queues=4, namesrv_addr=ns)
    n = replay.run(spark, replay.parse(["-n", ns, "--from-topic", filled.topic, "--to-topic", target,
                                        "--starting-timestamp", str(filled.between_ms), "--keep-order"]))
    assert n == 12
    source = read(spark, ns, topic=filled.topic, startingTimestamp=str(filled.between_ms))
    copied = read(spark, ns, topic=target)
    cols = ["body", "tags", "keys", "properties"]
    assert sorted(map(tuple, copied.select(*cols).collect())) == sorted(map(tuple, source.select(*cols).collect()))


# ---- the README example --------------------------------------------------------------------------


def test_readme_spark_example_works_as_written(spark: SparkSession, ns: str, filled: Filled,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    import re

    text = (ROOT / "README.md").read_text()
    section = text.split("## Spark", 1)[1]
    block = re.findall(r"```python\n(.*?)```", section, re.S)[0]
    assert len(block.strip().splitlines()) == 5
    code = block.replace("127.0.0.1:9876", ns).replace('"TopicTest"', f'"{filled.topic}"')
    exec(compile(code, "README.md", "exec"), {})
    assert "52" in capsys.readouterr().out


# ---- a Spark standalone cluster ------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Spark master and one 2-core worker on loopback, from the installed pyspark's classes."""
    work = tmp_path_factory.mktemp("standalone")
    env = child_env() | {"SPARK_HOME": str(SPARK_HOME), "SPARK_DAEMON_MEMORY": "384m",
                         "SPARK_LOG_DIR": str(work), "SPARK_WORKER_DIR": str(work / "worker")}
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    procs: list[subprocess.Popen[Any]] = []

    def start(name: str, *args: str) -> Path:
        log = work / f"{name}.log"
        with log.open("w") as f:
            procs.append(subprocess.Popen([spark_class, *args], stdout=f, stderr=subprocess.STDOUT, env=env,
                                          start_new_session=True))
        return log

    try:
        mlog = start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port",
                     str(port), "--webui-port", str(free_port()))
        wait_until(lambda: "I have been elected leader" in mlog.read_text() or procs[0].poll() is not None,
                   JOB_TIMEOUT, "the Spark master")
        assert procs[0].poll() is None, mlog.read_text()[-3000:]
        wlog = start("worker", "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1", "--cores", "2",
                     "--memory", "2g", "--webui-port", str(free_port()), "--work-dir", str(work / "worker"))
        wait_until(lambda: "Successfully registered with master" in wlog.read_text()
                   or procs[1].poll() is not None, JOB_TIMEOUT, "the Spark worker")
        assert procs[1].poll() is None, wlog.read_text()[-3000:]
        yield url
    finally:
        for p in reversed(procs):  # the worker's group holds its executors
            stop_group(p)


def test_standalone_cluster_reads_the_same_rows(spark: SparkSession, ns: str, filled: Filled, standalone: str,
                                                tmp_path: Path) -> None:
    out = tmp_path / "table"
    result = run_job("topic_to_parquet", "-n", ns, "--master", standalone, "--topic", filled.topic, "--output",
                     str(out), "--checkpoint", str(tmp_path / "ckpt"), "--available-now",
                     "--conf", "spark.executor.memory=512m", "--conf", "spark.driver.host=127.0.0.1",
                     "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=2",
                     log=tmp_path / "standalone.log")
    assert "started query" in result.stdout
    local = rows_by_id(read(spark, ns, topic=filled.topic))
    remote = rows_by_id(spark.read.parquet(str(out)))
    assert remote.keys() == local.keys() and len(remote) == 52
    for k, r in local.items():
        assert {c: remote[k][c] for c in r} == r


# ---- 4.9.7 ---------------------------------------------------------------------------------------


@pytest.mark.slow
def test_read_and_write_against_4_9_7(spark: SparkSession, reference_cluster_v4: Any) -> None:
    """The marked 4.x run against a 4.9.7 broker: what the Java producer sent is read once with the
    Java consumer's fields, and rows the sink writes reach the Java consumer (our Java peer
    program is built on the 5.3.3 client, which 4.9.7 brokers serve)."""
    ns4 = reference_cluster_v4.namesrv_addr
    java4 = JavaPeer(ns4)
    topic = uid("v4")
    create_topic(reference_cluster_v4.broker_addr, topic, queues=4, namesrv_addr=ns4)
    java4.produce(topic, 20, tag="TagA", keys="k{i}", props={"p": "välue-{i}"}, body_size=6000, compress=True)
    java4.produce(topic, 8, mode="batch", tag="TagB", keys="b{i}", body="batch body {i}")
    received = java4.consume(topic, 28, group=uid("javaref4"))
    rows = rows_by_id(read(spark, ns4, topic=topic))
    assert len(rows) == 28 == len({r.offset_msg_id for r in received})
    for j in received:
        r = rows[j.offset_msg_id]
        assert j.queue is not None
        assert (r["queueId"], r["queueOffset"], r["msgId"], r["tags"], r["keys"], bytes(r["body"])) == (
            j.queue.queue_id, j.queue_offset, j.msg_id, j.tags, j.keys, j.body)
        assert r["properties"] == j.user_properties
        assert (r["born"], r["stored"], r["sysFlag"]) == (j.born_timestamp, j.store_timestamp, j.sys_flag)

    sink_topic = uid("v4sink")
    create_topic(reference_cluster_v4.broker_addr, sink_topic, queues=4, namesrv_addr=ns4)
    consumer = java4.start_consumer(sink_topic, 200, group=uid("v4sinkjava"), timeout_ms=int(JOB_TIMEOUT * 1000))
    consumer.wait_started()
    df = spark.range(200).select(
        F.concat(F.lit("body-"), F.col("id").cast("string")).alias("body"),
        F.lit("T4").alias("tags"),
        F.concat(F.lit("key-"), F.col("id").cast("string")).alias("keys"),
        F.create_map(F.lit("n"), F.col("id").cast("string")).alias("properties"))
    df.write.format("rocketmq").option("nameServer", ns4).option("topic", sink_topic).mode("append").save()
    got = consumer.finish()
    assert sorted(r.keys for r in got) == sorted(f"key-{i}" for i in range(200))
    assert all(r.tags == "T4" and r.user_properties == {"n": r.keys[4:]} and r.body == f"body-{r.keys[4:]}".encode()
               for r in got)
