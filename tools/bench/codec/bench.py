"""Side-by-side codec benchmark: rmqwire's codec against the official RocketMQ Java classes.

Operations (shared/research/perf-reliability.md section 6, "Codec" row):
  * SEND_MESSAGE_V2 (310) request frame with the Java client's V2 extFields (a..n, wire-format.md
    8.4) and a 1 KiB body, JSON header and ROCKETMQ header: decode and encode;
  * a PULL_MESSAGE response body of 32 stored 1 KiB records (wire-format.md 10.4): decode.

Python writes the exact input bytes into a temporary directory and the Java half
(CodecBench.java, on the official 5.3.3 jars) reads them, so both sides decode identical bytes.
Every number is the best of R timed runs after a warm-up, on one pinned core when possible.

Run from the repo root: ``python -m tools.bench.codec [--quick] [--json]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from rmqwire.codec.codes import DEFAULT_VERSION, LanguageCode, SerializeType  # noqa: E402
from rmqwire.codec.frame import (  # noqa: E402
    FrameDecoder,
    RemotingCommand,
    decode_frame,
    encode_frame,
)
from rmqwire.codec.message import MessageExt, body_crc32, decode_messages, encode_message  # noqa: E402

HERE = Path(__file__).resolve().parent
JAVA_SOURCE = HERE / "CodecBench.java"

SEND_MESSAGE_V2 = 310
BODY_SIZE = 1024
PULL_COUNT = 32
FEED_FRAMES = 32  # frames per FrameDecoder.feed chunk: ~45 KiB, under Twisted's 64 KiB read size

#: Single-core floors from perf-reliability.md section 6 (items per second).
TARGETS = {"decode": 75_000, "encode": 110_000, "pull": 150_000}


# ---- inputs ---------------------------------------------------------------------------------------


def send_ext_fields(born_ms: int = 1_700_000_000_000) -> dict[str, str]:
    """SendMessageRequestHeaderV2 as the 5.x Java producer fills it (l is null, so absent)."""
    props = (
        "KEYS\x01order-000042\x02"
        "UNIQ_KEY\x017F0000010F6818B4AAC25C0F3E7A0000\x02"
        "WAIT\x01true\x02"
        "TAGS\x01TagA\x02"
    )
    return {
        "a": "please_rename_unique_group_name",
        "b": "BenchmarkTest",
        "c": "TBW102",
        "d": "4",
        "e": "3",
        "f": "0",
        "g": str(born_ms),
        "h": "0",
        "i": props,
        "j": "0",
        "k": "false",
        "m": "false",
        "n": "broker-a",
    }


def stored_messages(count: int = PULL_COUNT, body_size: int = BODY_SIZE) -> list[MessageExt]:
    """What a broker returns for a pull: consecutive offsets, broker-added CLUSTER property."""
    rng = random.Random(42)
    out = []
    phys = 1_048_576
    for n in range(count):
        body = rng.randbytes(body_size)
        props = {
            "KEYS": f"order-{n:06d}",
            "UNIQ_KEY": f"7F0000010F6818B4AAC25C0F3E7A{n:04X}",
            "CLUSTER": "DefaultCluster",
            "WAIT": "true",
            "TAGS": "TagA",
        }
        m = MessageExt(
            topic="BenchmarkTest", body=body, properties=props, queue_id=3, queue_offset=1000 + n,
            born_timestamp=1_700_000_000_000 + n, born_host=("192.168.0.10", 54321),
            store_timestamp=1_700_000_000_005 + n, store_host=("192.168.0.20", 10911),
            commit_log_offset=phys, body_crc=body_crc32(body),
        )  # fmt: skip
        phys += len(encode_message(m))
        out.append(m)
    return out


@dataclasses.dataclass(frozen=True, slots=True)
class Inputs:
    ext_fields: dict[str, str]
    body: bytes
    json_frame: bytes
    rocketmq_frame: bytes
    pull_body: bytes


def build_inputs() -> Inputs:
    ext = send_ext_fields()
    body = random.Random(7).randbytes(BODY_SIZE)
    cmd = _send_command(ext, body, opaque=1)
    pull_body = b"".join(encode_message(m) for m in stored_messages())
    return Inputs(
        ext_fields=ext,
        body=body,
        json_frame=encode_frame(cmd, SerializeType.JSON),
        rocketmq_frame=encode_frame(cmd, SerializeType.ROCKETMQ),
        pull_body=pull_body,
    )


def _send_command(ext: dict[str, str], body: bytes, opaque: int) -> RemotingCommand:
    # Language JAVA and the 5.3.3 version so the frames match what the Java producer sends.
    return RemotingCommand.request(
        SEND_MESSAGE_V2, ext, body, opaque=opaque, language=LanguageCode.JAVA, version=DEFAULT_VERSION
    )


def write_inputs(inputs: Inputs, directory: Path) -> None:
    (directory / "send_json.frame").write_bytes(inputs.json_frame)
    (directory / "send_rocketmq.frame").write_bytes(inputs.rocketmq_frame)
    (directory / "pull_body.bin").write_bytes(inputs.pull_body)
    (directory / "body.bin").write_bytes(inputs.body)
    lines = [f"{k}={v.encode().hex()}" for k, v in inputs.ext_fields.items()]
    (directory / "ext_fields.txt").write_text("\n".join(lines) + "\n")


# ---- timing ---------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Timing:
    """``ops_per_run`` calls of an operation, each handling ``items_per_op`` frames/messages.

    Each run is timed twice: wall clock, and CPU time of the whole process. On a shared machine
    the CPU-time rate (items per CPU-second) is the stable one, since time slices lost to other
    processes do not count; it is the rate the table shows and the targets apply to.
    """

    name: str
    items_per_op: int
    ops_per_run: int
    run_seconds: list[float]
    run_cpu_seconds: list[float]

    def _rate(self, seconds: float) -> float:
        return self.ops_per_run * self.items_per_op / seconds if seconds > 0 else float("inf")

    @property
    def best_per_cpu_s(self) -> float:
        return self._rate(min(self.run_cpu_seconds))

    @property
    def median_per_cpu_s(self) -> float:
        return self._rate(statistics.median(self.run_cpu_seconds))

    @property
    def best_per_wall_s(self) -> float:
        return self._rate(min(self.run_seconds))

    @property
    def best_us_per_item(self) -> float:
        return 1e6 / self.best_per_cpu_s


@dataclasses.dataclass(frozen=True, slots=True)
class Settings:
    warmup_s: float
    run_s: float
    runs: int
    java_warmup_s: float


FULL = Settings(warmup_s=1.0, run_s=1.0, runs=5, java_warmup_s=3.0)
QUICK = Settings(warmup_s=0.2, run_s=0.2, runs=3, java_warmup_s=1.0)


def time_op(name: str, fn: Callable[[], object], items_per_op: int, s: Settings) -> Timing:
    """Warm up for ``warmup_s``, size a run to about ``run_s``, then time ``runs`` runs."""
    perf = time.perf_counter
    calls = 0
    t0 = perf()
    while perf() - t0 < s.warmup_s or calls == 0:
        for _ in range(10):
            fn()
        calls += 10
    per_call = (perf() - t0) / calls
    n = max(10, int(s.run_s / per_call))
    loop = range(n)
    cpu = time.process_time
    seconds, cpu_seconds = [], []
    for _ in range(s.runs):
        c, t = cpu(), perf()
        for _ in loop:
            fn()
        t1 = perf()
        cpu_seconds.append(cpu() - c)
        seconds.append(t1 - t)
    return Timing(name, items_per_op, n, seconds, cpu_seconds)


# ---- the Python side ------------------------------------------------------------------------------


def python_ops(inputs: Inputs) -> dict[str, tuple[Callable[[], object], int]]:
    """name -> (operation, items per call). Names match CodecBench.java where the work matches."""
    ext, body = inputs.ext_fields, inputs.body
    ops: dict[str, tuple[Callable[[], object], int]] = {}
    for label, frame, stype in (
        ("send_json", inputs.json_frame, SerializeType.JSON),
        ("send_rocketmq", inputs.rocketmq_frame, SerializeType.ROCKETMQ),
    ):
        chunk = frame * FEED_FRAMES
        decoder = FrameDecoder()
        prebuilt = _send_command(ext, body, opaque=1)

        def decode(frame: bytes = frame) -> object:
            return decode_frame(frame)

        def feed(chunk: bytes = chunk, decoder: FrameDecoder = decoder) -> object:
            return decoder.feed(chunk)

        # Like the Java client per send: a new command around the header, then the frame bytes.
        def encode(stype: SerializeType = stype) -> object:
            return encode_frame(_send_command(ext, body, opaque=7), stype)

        def encode_only(cmd: RemotingCommand = prebuilt, stype: SerializeType = stype) -> object:
            return encode_frame(cmd, stype)

        ops[f"{label}.decode"] = (decode, 1)
        ops[f"{label}.feed"] = (feed, FEED_FRAMES)
        ops[f"{label}.encode"] = (encode, 1)
        ops[f"{label}.encode_frame"] = (encode_only, 1)
    pull_body = inputs.pull_body
    ops["pull32.decode"] = (lambda: decode_messages(pull_body), PULL_COUNT)
    return ops


def check_python(inputs: Inputs) -> None:
    """The timed operations really decode what the inputs hold (a benchmark of wrong work is void)."""
    for frame in (inputs.json_frame, inputs.rocketmq_frame):
        cmd = decode_frame(frame)
        assert cmd.code == SEND_MESSAGE_V2 and cmd.ext_fields == inputs.ext_fields
        assert cmd.body == inputs.body
        cmds = FrameDecoder().feed(frame * FEED_FRAMES)
        assert len(cmds) == FEED_FRAMES and cmds[-1] == cmd
    msgs = decode_messages(inputs.pull_body)
    expected = stored_messages()
    assert len(msgs) == PULL_COUNT, f"decode_messages gave {len(msgs)} messages"
    for got, want in zip(msgs, expected):
        assert bytes(got.body) == want.body and got.topic == want.topic
        assert got.queue_offset == want.queue_offset and got.properties.get("TAGS") == "TagA"


def run_python(inputs: Inputs, s: Settings, only: set[str] | None = None) -> dict[str, Timing]:
    out = {}
    for name, (fn, items) in python_ops(inputs).items():
        if only is None or name in only:
            out[name] = time_op(name, fn, items, s)
    return out


# ---- the Java side --------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class JavaRun:
    timings: dict[str, Timing]
    java_version: str
    vm: str
    available_processors: int
    max_heap_bytes: int
    command: list[str]
    cross_check: dict[str, str]


JVM_FLAGS = ["-Xmx512m", f"-Drocketmq.remoting.version={DEFAULT_VERSION}"]


def run_java(inputs: Inputs, workdir: Path, s: Settings) -> JavaRun:
    from tools.reference import jars  # local import: only the Java side needs Maven/JDK

    classes = jars.compile_java([JAVA_SOURCE], "codecbench")
    cmd = [
        jars.java_bin(), *JVM_FLAGS, "-cp", f"{classes}{os.pathsep}{jars.classpath()}", "CodecBench",
        str(workdir), str(int(s.java_warmup_s * 1000)), str(int(s.run_s * 1000)), str(s.runs),
    ]  # fmt: skip
    # The JVM inherits this process's CPU affinity, so it runs on the same pinned core.
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=workdir)
    if proc.returncode != 0:
        raise RuntimeError(f"CodecBench failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")][-1]
    data = json.loads(line)
    timings = {
        r["name"]: Timing(
            r["name"], r["items_per_op"], r["ops_per_run"], r["run_seconds"], r["run_cpu_seconds"]
        )
        for r in data["results"]
    }
    return JavaRun(
        timings=timings,
        java_version=data["java_version"],
        vm=data["vm"],
        available_processors=data["available_processors"],
        max_heap_bytes=data["max_heap_bytes"],
        command=cmd,
        cross_check=cross_check_java_frames(inputs, workdir),
    )


def cross_check_java_frames(inputs: Inputs, workdir: Path) -> dict[str, str]:
    """Decode the frames Java encoded and re-encode them with rmqwire: are the bytes identical?"""
    result = {}
    for label, stype in (("json", SerializeType.JSON), ("rocketmq", SerializeType.ROCKETMQ)):
        data = (workdir / f"java_send_{label}.frame").read_bytes()
        cmd = decode_frame(data)
        same_content = cmd.ext_fields == inputs.ext_fields and cmd.body == inputs.body
        identical = encode_frame(cmd, stype) == data
        result[label] = (
            "decodes to the same header/body; rmqwire re-encode byte-identical"
            if same_content and identical
            else f"MISMATCH: same_content={same_content} byte_identical={identical}"
        )
    return result


# ---- conditions and report ------------------------------------------------------------------------


def pin_to_one_core(cpu: int | None) -> str:
    if not hasattr(os, "sched_setaffinity"):
        return "not pinned (no os.sched_setaffinity)"
    allowed = sorted(os.sched_getaffinity(0))
    target = allowed[-1] if cpu is None else cpu
    try:
        os.sched_setaffinity(0, {target})
    except OSError as e:
        return f"not pinned ({e})"
    return f"CPU {target} (of {allowed}); Python and the JVM both pinned there, run one after the other"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


# Rows: (label, python op, java op, target kind). Java ops are the official-class equivalents.
ROWS = [
    ("SEND_V2 JSON decode   decode_frame / RemotingCommand.decode", "send_json.decode", "send_json.decode", "decode"),
    ("SEND_V2 JSON decode   FrameDecoder.feed x32 / .decode", "send_json.feed", "send_json.decode", "decode"),
    ("SEND_V2 JSON encode   request+encode_frame / encode()", "send_json.encode", "send_json.encode", "encode"),
    ("SEND_V2 JSON encode   request+encode_frame / fastEncodeHeader", "send_json.encode", "send_json.fast_encode", "encode"),
    ("SEND_V2 JSON encode   encode_frame(prebuilt) / encode()", "send_json.encode_frame", "send_json.encode", "encode"),
    ("SEND_V2 RMQ  decode   decode_frame / RemotingCommand.decode", "send_rocketmq.decode", "send_rocketmq.decode", "decode"),
    ("SEND_V2 RMQ  decode   FrameDecoder.feed x32 / .decode", "send_rocketmq.feed", "send_rocketmq.decode", "decode"),
    ("SEND_V2 RMQ  encode   request+encode_frame / encode()", "send_rocketmq.encode", "send_rocketmq.encode", "encode"),
    ("SEND_V2 RMQ  encode   request+encode_frame / fastEncodeHeader", "send_rocketmq.encode", "send_rocketmq.fast_encode", "encode"),
    ("SEND_V2 RMQ  encode   encode_frame(prebuilt) / encode()", "send_rocketmq.encode_frame", "send_rocketmq.encode", "encode"),
    ("PULL 32x1KiB decode   decode_messages / MessageDecoder.decodes (per msg)", "pull32.decode", "pull32.decode", "pull"),
]  # fmt: skip


def build_report(
    py: dict[str, Timing], java: JavaRun | None, java_error: str | None, conditions: dict
) -> dict:
    rows = []
    for label, py_name, java_name, kind in ROWS:
        p = py.get(py_name)
        j = java.timings.get(java_name) if java else None
        target = TARGETS[kind]
        rows.append(
            {
                "operation": label,
                "python_op": py_name,
                "java_op": java_name,
                "rmqwire_per_cpu_s": p.best_per_cpu_s if p else None,
                "rmqwire_us": p.best_us_per_item if p else None,
                "rmqwire_median_per_cpu_s": p.median_per_cpu_s if p else None,
                "rmqwire_per_wall_s": p.best_per_wall_s if p else None,
                "java_per_cpu_s": j.best_per_cpu_s if j else None,
                "java_us": j.best_us_per_item if j else None,
                "java_median_per_cpu_s": j.median_per_cpu_s if j else None,
                "java_per_wall_s": j.best_per_wall_s if j else None,
                "ratio": (p.best_per_cpu_s / j.best_per_cpu_s) if p and j else None,
                "target_per_s": target,
                "pass": (p.best_per_cpu_s >= target) if p else None,
            }
        )
    return {"rows": rows, "conditions": conditions, "java_error": java_error}


def format_table(report: dict) -> str:
    def num(v: float | None, fmt: str) -> str:
        return "n/a" if v is None else format(v, fmt)

    head = f"{'operation':<72} {'rmqwire/s':>11} {'µs':>7} {'Java/s':>11} {'µs':>7} {'ratio':>7} {'target':>8} {'':>4}"
    lines = [head, "-" * len(head)]
    for r in report["rows"]:
        verdict = {True: "PASS", False: "FAIL", None: "n/a"}[r["pass"]]
        lines.append(
            f"{r['operation']:<72} {num(r['rmqwire_per_cpu_s'], ',.0f'):>11} {num(r['rmqwire_us'], '.2f'):>7}"
            f" {num(r['java_per_cpu_s'], ',.0f'):>11} {num(r['java_us'], '.2f'):>7}"
            f" {num(r['ratio'], '.3f'):>7} {r['target_per_s']:>8,} {verdict:>4}"
        )
    lines.append("")
    lines.append(
        "Rates are frames (PULL: messages) per CPU-second of the process, best of the runs;"
        " µs = CPU µs per item; ratio = rmqwire / Java. --json also gives wall-clock and median rates."
    )
    lines.append("Targets (perf-reliability.md section 6) apply to rmqwire on one core.")
    if report["java_error"]:
        lines.append(f"Java side not run: {report['java_error']}")
    lines.append("")
    lines.append("Conditions:")
    for k, v in report["conditions"].items():
        lines.append(f"  {k}: {v}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.codec", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="short smoke run (about 20 s)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--no-java", action="store_true", help="time rmqwire only")
    parser.add_argument("--cpu", type=int, default=None, help="core to pin to (default: the last allowed)")
    parser.add_argument("--runs", type=int, default=None, help="timed runs per operation (best is kept)")
    parser.add_argument("--keep-inputs", type=Path, default=None, help="also write the input bytes here")
    args = parser.parse_args(argv)

    settings = QUICK if args.quick else FULL
    if args.runs:
        settings = dataclasses.replace(settings, runs=args.runs)
    pinning = pin_to_one_core(args.cpu)
    inputs = build_inputs()
    check_python(inputs)
    load_before = loadavg()

    py = run_python(inputs, settings)
    java: JavaRun | None = None
    java_error = None
    if not args.no_java:
        with tempfile.TemporaryDirectory(prefix="rmqwire-codecbench-") as tmp:
            write_inputs(inputs, Path(tmp))
            try:
                java = run_java(inputs, Path(tmp), settings)
            except Exception as e:  # noqa: BLE001 - report why, still print the Python half
                java_error = f"{type(e).__name__}: {e}"
    else:
        java_error = "--no-java"
    if args.keep_inputs:
        args.keep_inputs.mkdir(parents=True, exist_ok=True)
        write_inputs(inputs, args.keep_inputs)

    conditions = {
        "python": f"{platform.python_implementation()} {platform.python_version()} ({sys.executable})",
        "cpu": f"{cpu_model()}, {os.cpu_count()} logical CPUs",
        "pinning": pinning,
        "load average before / after": f"{load_before} / {loadavg()}",
        "settings": (
            f"warm-up {settings.warmup_s}s (Java {settings.java_warmup_s}s per op), "
            f"runs of ~{settings.run_s}s, best of {settings.runs}"
        ),
        "send frame sizes": f"JSON {len(inputs.json_frame)} B, ROCKETMQ {len(inputs.rocketmq_frame)} B "
        f"({len(inputs.ext_fields)} extFields, {BODY_SIZE} B body)",
        "pull body": f"{len(inputs.pull_body)} B, {PULL_COUNT} records; built by rmqwire encode_message",
    }
    if java is not None:
        conditions["java"] = (
            f"{java.java_version} {java.vm}, availableProcessors={java.available_processors}, "
            f"max heap {java.max_heap_bytes // 2**20} MiB, flags {' '.join(JVM_FLAGS)}, "
            "RocketMQ 5.3.3 jars"
        )
        for label, verdict in java.cross_check.items():
            conditions[f"Java-encoded {label} frame"] = verdict

    report = build_report(py, java, java_error, conditions)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(format_table(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
