"""Resolve the official RocketMQ runtime classpath from Maven Central and compile our Java helpers.

Jars land in ``.cache/rocketmq/<version>/lib`` (outside git). Resolution is idempotent: a complete
lib directory (marked by ``.resolved``) is reused without touching the network, so it works offline
once fetched. The RocketMQ version lives in one place: DEFAULT_VERSION here (and the pom's default).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
POM = REPO_ROOT / "tools" / "reference" / "pom.xml"
CACHE_ROOT = Path(os.environ.get("RMQWIRE_CACHE", REPO_ROOT / ".cache"))

DEFAULT_VERSION = os.environ.get("RMQWIRE_ROCKETMQ_VERSION", "5.3.3")
# 4.9.7 is the 4.x reference: Maven Central has no rocketmq-namesrv / rocketmq-broker jar for 4.9.8
# (their maven-metadata.xml lists 4.9.0-4.9.5 and 4.9.7; rocketmq-all-4.9.8.pom, -client, -tools, -common
# and -remoting 4.9.8 are there, so the 4.9.8 release is published for clients only).
REFERENCE_4X = "4.9.7"
SUPPORTED_VERSIONS = ("5.3.3", REFERENCE_4X)


class ReferenceUnavailable(RuntimeError):
    """The official jars or a JDK 17 cannot be had on this machine."""


def is_v4(version: str) -> bool:
    """4.x servers differ in how they start (logback files under ROCKETMQ_HOME/conf, no bindAddress)."""
    return version.split(".", 1)[0] == "4"


def java_home() -> Path:
    """JDK 17, pinned by path: a newer JDK on PATH rejects some RocketMQ JVM flags."""
    candidates = [os.environ.get("RMQWIRE_JAVA_HOME"), "/usr/lib/jvm/java-17-openjdk-amd64"]
    for c in candidates:
        if c and (Path(c) / "bin" / "javac").exists():
            return Path(c)
    java = shutil.which("javac")
    if java:
        return Path(java).resolve().parents[1]
    raise ReferenceUnavailable("no JDK 17 found (set RMQWIRE_JAVA_HOME)")


def java_bin() -> str:
    return str(java_home() / "bin" / "java")


def javac_bin() -> str:
    return str(java_home() / "bin" / "javac")


def lib_dir(version: str = DEFAULT_VERSION) -> Path:
    return CACHE_ROOT / "rocketmq" / version / "lib"


def ensure_jars(version: str = DEFAULT_VERSION) -> Path:
    """Resolve the official jars for ``version`` (namesrv, broker, tools, client) into lib_dir."""
    return resolve_pom(POM, lib_dir(version), {"rocketmq.version": version}, f"RocketMQ {version}",
                       "rocketmq-broker-*.jar")


def resolve_pom(pom: Path, lib: Path, properties: dict[str, str], label: str, expect: str) -> Path:
    """``mvn dependency:copy-dependencies`` of ``pom`` into ``lib``, once (marker file ``.resolved``)."""
    marker = lib / ".resolved"
    if marker.exists():
        return lib
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ReferenceUnavailable("Maven (mvn) is not installed")
    lib.mkdir(parents=True, exist_ok=True)
    # Several pytest processes may resolve at once; one mvn run per lib dir, the others wait.
    with open(lib.parent / ".resolve.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists():
            return lib
        cmd = [mvn, "-B", "-q", "-f", str(pom), *(f"-D{k}={v}" for k, v in properties.items()),
               f"-Dlib.dir={lib}", "dependency:copy-dependencies"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise ReferenceUnavailable(_mvn_failure(label, proc.stdout + proc.stderr))
        if not any(lib.glob(expect)):
            raise ReferenceUnavailable(f"mvn finished but {lib} holds no {expect}")
        marker.write_text(label + "\n")
    return lib


def _mvn_failure(label: str, output: str) -> str:
    missing = sorted(set(re.findall(r"org\.apache\.rocketmq:[\w-]+:jar:\d[\w.-]*\d", output)))
    msg = f"mvn could not resolve {label}"
    if missing:
        msg += f": {', '.join(missing)} not on Maven Central"
        if any(":rocketmq-namesrv:" in m or ":rocketmq-broker:" in m for m in missing):
            msg += f" (that release's server modules were never published there; the 4.x reference is {REFERENCE_4X})"
    tail = "\n".join(line for line in output.splitlines() if "ERROR" in line)[-2000:] or output[-2000:]
    return f"{msg}\n{tail}"


def classpath(version: str = DEFAULT_VERSION) -> str:
    """A ``-cp`` value for the official jars (JVM wildcard, expanded by java itself)."""
    return str(ensure_jars(version)) + "/*"


def compile_java(sources: list[Path], name: str, version: str = DEFAULT_VERSION) -> Path:
    """Compile our own Java helper sources against the official jars; cached by content hash.

    Returns the class output directory, to put on the classpath before the official jars.
    """
    digest = hashlib.sha256()
    for src in sorted(sources):
        digest.update(src.name.encode())
        digest.update(src.read_bytes())
    out = CACHE_ROOT / "java-build" / version / f"{name}-{digest.hexdigest()[:16]}"
    if (out / ".compiled").exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    # Several pytest processes may compile at once: one javac per output dir, the others wait
    # (a JVM must never load a class file another javac is still writing).
    with open(out.parent / f".{out.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (out / ".compiled").exists():
            return out
        cmd = [javac_bin(), "-nowarn", "-encoding", "UTF-8", "-d", str(out), "-cp", classpath(version),
               *map(str, sources)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"javac failed for {name}:\n{proc.stdout}{proc.stderr}")
        (out / ".compiled").write_text("ok\n")
    return out
