"""The Docker image of the official RocketMQ for the container backend.

Where a registry serves it, the image is ``apache/rocketmq:<version>`` itself, unchanged. Where none
is reachable, the same release is built here, once, from parts this machine can get:

1. a base: a Debian bookworm *minbase* root file system with a JRE 17, made by ``debootstrap`` from
   the Debian mirror the machine's apt sources name (read at run time; no mirror is written in the
   repository), plus a ``rocketmq`` user (uid 3000, as in the official image), ``docker import``-ed;
2. on top, the official jars already fetched from Maven Central (tools.reference.jars), laid out as
   the official image lays them out: ``/home/rocketmq/rocketmq-<version>/lib``, ``ROCKETMQ_HOME``.

Both images are tagged by a hash of what went into them (the base: suite, packages and user; the
top: the base tag and every jar's bytes), so a second run finds them and builds nothing. The
official image's ``bin/`` scripts are not on Maven Central; the container backend runs the main
classes with ``java`` on the built image (docker_cluster.py).

``python -m tools.reference.image [VERSION]`` makes sure the image exists and prints how long it took.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.reference import jars
from tools.reference.jars import ReferenceUnavailable

OFFICIAL_REPO = "apache/rocketmq"
LOCAL_REPO = "rmqwire/rocketmq"
BASE_REPO = "rmqwire/debian-jre"
CONTENT_LABEL = "org.rmqwire.content"

SUITE = "bookworm"
VARIANT = "minbase"
PACKAGES = ("openjdk-17-jre-headless",)
ROCKETMQ_USER = "rocketmq"
ROCKETMQ_UID = 3000     # the official image's user id
USER_HOME = "/home/rocketmq"
# Run inside the new root file system (chroot) after debootstrap; part of the base image's hash.
BASE_SETUP = (
    ("groupadd", "-g", str(ROCKETMQ_UID), ROCKETMQ_USER),
    ("useradd", "-u", str(ROCKETMQ_UID), "-g", str(ROCKETMQ_UID), "-m", "-d", USER_HOME, "-s", "/bin/sh",
     ROCKETMQ_USER),
)
# Package caches are not needed at run time; dropping them keeps the image ~60 MB smaller.
BASE_CLEAN = ("var/cache/apt/archives", "var/lib/apt/lists")

PULL_TIMEOUT = 60.0
APT_SOURCES = Path("/etc/apt")
IMAGE_MODES = ("auto", "official", "local")


@dataclass(frozen=True, slots=True)
class RocketmqImage:
    """The image the container backend runs, and how it was obtained."""

    tag: str
    version: str
    official: bool          # apache/rocketmq itself (its bin/ scripts, JDK 8); else built here (JRE 17)
    rocketmq_home: str      # ROCKETMQ_HOME inside the image
    how: str                # "present", "pulled", "cached" or "built"
    seconds: float          # time spent getting it (the build time when how == "built")

    def describe(self) -> str:
        kind = "official image" if self.official else "built locally"
        return f"{self.tag} ({kind}; {self.how} in {self.seconds:.1f} s)"


def rocketmq_home(version: str) -> str:
    return f"{USER_HOME}/rocketmq-{version}"


# --------------------------------------------------------------------------- the apt mirror

@dataclass(frozen=True, slots=True)
class AptSource:
    uri: str
    suites: tuple[str, ...]
    components: tuple[str, ...]


def apt_sources(root: Path = APT_SOURCES) -> list[AptSource]:
    """The ``deb`` entries apt reads: sources.list and sources.list.d/*.list (one-line form) and
    sources.list.d/*.sources (deb822 form), in apt's order."""
    files = [root / "sources.list"] + sorted((root / "sources.list.d").glob("*.list")) \
        + sorted((root / "sources.list.d").glob("*.sources"))
    found: list[AptSource] = []
    for f in files:
        try:
            text = f.read_text()
        except OSError:
            continue
        found.extend(_parse_deb822(text) if f.suffix == ".sources" else _parse_one_line(text))
    return found


def _parse_one_line(text: str) -> list[AptSource]:
    out = []
    for line in text.splitlines():
        line = re.sub(r"\[[^\]]*\]", " ", line.split("#", 1)[0]).split()   # drop [options]
        if len(line) >= 3 and line[0] == "deb":
            out.append(AptSource(line[1].rstrip("/"), (line[2],), tuple(line[3:])))
    return out


def _parse_deb822(text: str) -> list[AptSource]:
    out = []
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        key = None
        for line in stanza.splitlines():
            if line.startswith("#") or not line.strip():
                continue
            if line[0].isspace() and key:      # continuation line
                fields[key] += " " + line.strip()
                continue
            key, _, value = line.partition(":")
            key = key.strip().lower()
            fields[key] = value.strip()
        if "deb" not in fields.get("types", "").split() or fields.get("enabled", "yes").lower() == "no":
            continue
        for uri in fields.get("uris", "").split():
            out.append(AptSource(uri.rstrip("/"), tuple(fields.get("suites", "").split()),
                                 tuple(fields.get("components", "").split())))
    return out


def debian_mirror(suite: str = SUITE, root: Path = APT_SOURCES) -> str:
    """The mirror of the machine's apt sources that serves ``suite`` main (env RMQWIRE_DEBIAN_MIRROR
    overrides it). The host is never hard-coded: the machine's own configuration decides."""
    override = os.environ.get("RMQWIRE_DEBIAN_MIRROR")
    if override:
        return override
    for src in apt_sources(root):
        if suite in src.suites and "main" in src.components:
            return src.uri
    raise ReferenceUnavailable(
        f"no Debian {suite} mirror with 'main' in the apt sources under {root} (needed to build the "
        f"RocketMQ image with debootstrap); set RMQWIRE_DEBIAN_MIRROR")


# --------------------------------------------------------------------------- docker helpers

def docker_client(timeout: float = 60.0) -> Any:
    import docker

    try:
        return docker.from_env(timeout=timeout)
    except Exception as exc:   # DockerException, requests errors, FileNotFoundError ...
        raise ReferenceUnavailable(f"no Docker engine ({type(exc).__name__}: {exc})") from exc


def has_image(client: Any, tag: str) -> bool:
    import docker.errors

    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


def try_pull(tag: str, timeout: float = PULL_TIMEOUT) -> str | None:
    """Pull ``tag``; None on success, else why not (no registry, unknown tag, timeout)."""
    result: list[str | None] = []

    def pull() -> None:
        try:
            client = docker_client(timeout=timeout)
            try:
                repo, _, version = tag.rpartition(":")
                client.images.pull(repo, tag=version)
            finally:
                client.close()
            result.append(None)
        except Exception as exc:   # APIError, ReferenceUnavailable, requests errors
            result.append(f"{type(exc).__name__}: {str(exc)[:300]}")

    # The engine, not us, talks to the registry: a hung pull is bounded here by abandoning it.
    worker = threading.Thread(target=pull, name=f"pull {tag}", daemon=True)
    worker.start()
    worker.join(timeout)
    return result[0] if result else f"no answer within {timeout:.0f} s"


def _sudo() -> list[str]:
    """debootstrap, chroot and reading the root file system need root: sudo -n when we are not."""
    if os.geteuid() == 0:
        return []
    if shutil.which("sudo") and subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode == 0:
        return ["sudo", "-n"]
    raise ReferenceUnavailable("building the RocketMQ image needs root (debootstrap) and sudo -n is not allowed")


def _which_sbin(name: str) -> str:
    found = shutil.which(name, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
    if found is None:
        raise ReferenceUnavailable(f"{name} is not installed (scripts/setup.sh installs it with docker.io)")
    return found


# --------------------------------------------------------------------------- base image

def base_tag() -> str:
    digest = hashlib.sha256(repr((SUITE, VARIANT, PACKAGES, BASE_SETUP, BASE_CLEAN)).encode()).hexdigest()
    return f"{BASE_REPO}:{SUITE}-{digest[:12]}"


def build_base(client: Any, tag: str, log: Any = print) -> None:
    """debootstrap a minbase root file system with the JRE and import it as ``tag``."""
    sudo = _sudo()
    debootstrap = _which_sbin("debootstrap")
    mirror = debian_mirror()
    work = Path(tempfile.mkdtemp(prefix="rmqwire-rootfs-", dir=_work_dir()))
    rootfs = work / "rootfs"
    try:
        t0 = time.monotonic()
        cmd = [*sudo, debootstrap, f"--variant={VARIANT}", f"--include={','.join(PACKAGES)}", SUITE,
               str(rootfs), mirror]
        log(f"debootstrap {SUITE} ({VARIANT}, {', '.join(PACKAGES)}) from {mirror}")
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True)
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-20:])
            log_file = rootfs / "debootstrap" / "debootstrap.log"
            if log_file.exists():
                tail += "\n" + "\n".join(log_file.read_text(errors="replace").splitlines()[-20:])
            raise ReferenceUnavailable(f"debootstrap from {mirror} failed ({proc.returncode}):\n{tail}")
        log(f"debootstrap: {time.monotonic() - t0:.1f} s")
        for argv in BASE_SETUP:
            subprocess.run([*sudo, "chroot", str(rootfs), *argv], check=True, capture_output=True)
        for rel in BASE_CLEAN:
            subprocess.run([*sudo, "find", str(rootfs / rel), "-mindepth", "1", "-delete"], check=True)
        t1 = time.monotonic()
        tar = subprocess.Popen([*sudo, "tar", "-C", str(rootfs), "--numeric-owner", "-c", "."],
                               stdout=subprocess.PIPE)
        assert tar.stdout is not None
        try:
            client.api.import_image_from_stream(
                tar.stdout, repository=tag.split(":")[0], tag=tag.split(":")[1],
                changes=[f"LABEL {CONTENT_LABEL}={tag.split(':')[1]}", "ENV LANG=C.UTF-8"])
        finally:
            tar.stdout.close()
            if tar.wait() != 0:
                raise ReferenceUnavailable(f"tar of {rootfs} failed ({tar.returncode})")
        if not has_image(client, tag):
            raise ReferenceUnavailable(f"docker import did not produce {tag}")
        log(f"docker import: {time.monotonic() - t1:.1f} s")
    finally:
        subprocess.run([*sudo, "rm", "-rf", "--one-file-system", str(work)], check=False)


# --------------------------------------------------------------------------- RocketMQ image

def _dockerfile(base: str, version: str) -> str:
    home = rocketmq_home(version)
    return (f"FROM {base}\n"
            f"COPY --chown={ROCKETMQ_UID}:{ROCKETMQ_UID} home/ {home}/\n"
            f"ENV ROCKETMQ_HOME={home}\n"
            f"USER {ROCKETMQ_USER}\n"
            f"WORKDIR {home}\n")


def _context_files(version: str) -> list[tuple[str, Path | bytes]]:
    """(path in ROCKETMQ_HOME, host file or bytes): the jars, plus the logback files a 4.x server
    reads from ROCKETMQ_HOME/conf (the same ones the JVM backend writes)."""
    lib = jars.ensure_jars(version)
    files: list[tuple[str, Path | bytes]] = [(f"lib/{p.name}", p) for p in sorted(lib.glob("*.jar"))]
    if jars.is_v4(version):
        from tools.reference.cluster import write_v4_logback

        with tempfile.TemporaryDirectory(prefix="rmqwire-v4home-") as home:
            write_v4_logback(Path(home))
            files += [(f"conf/{p.name}", p.read_bytes()) for p in sorted((Path(home) / "conf").iterdir())]
    return files


def local_tag(version: str, base: str, files: list[tuple[str, Path | bytes]]) -> str:
    digest = hashlib.sha256(_dockerfile(base, version).encode())
    for rel, src in files:
        digest.update(rel.encode() + b"\0")
        if isinstance(src, bytes):
            digest.update(src)
        else:
            with open(src, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    digest.update(chunk)
        digest.update(b"\0")
    return f"{LOCAL_REPO}:{version}-{digest.hexdigest()[:12]}"


def build_local(client: Any, tag: str, base: str, version: str, files: list[tuple[str, Path | bytes]]) -> None:
    def add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        info.mode = 0o644
        tar.addfile(info, io.BytesIO(data))

    with tempfile.TemporaryFile(dir=_work_dir()) as context:
        with tarfile.open(fileobj=context, mode="w") as tar:
            add_bytes(tar, "Dockerfile", _dockerfile(base, version).encode())
            for rel, src in files:
                if isinstance(src, bytes):
                    add_bytes(tar, f"home/{rel}", src)
                else:
                    tar.add(src, arcname=f"home/{rel}")
        context.seek(0)
        # The classic builder: only COPY/ENV/USER, so no build container needs a network.
        client.images.build(fileobj=context, custom_context=True, tag=tag, rm=True, forcerm=True, pull=False,
                            labels={CONTENT_LABEL: tag.split(":", 1)[1]})


def _work_dir() -> Path:
    d = jars.CACHE_ROOT / "docker"
    d.mkdir(parents=True, exist_ok=True)
    return d


def image_mode() -> str:
    mode = os.environ.get("RMQWIRE_DOCKER_IMAGE", "auto").lower()
    if mode not in IMAGE_MODES:
        raise ValueError(f"RMQWIRE_DOCKER_IMAGE must be one of {IMAGE_MODES}, not {mode!r}")
    return mode


def ensure_image(version: str = jars.DEFAULT_VERSION, log: Any = print) -> RocketmqImage:
    """The image to run ``version`` from, getting it if needed (env RMQWIRE_DOCKER_IMAGE: auto,
    official or local).

    auto: the official image if it is already here; else our build if already here; else pull the
    official image; else build ours. Builds are serialised across processes by a file lock.
    """
    mode = image_mode()
    official = f"{OFFICIAL_REPO}:{version}"
    t0 = time.monotonic()
    client = docker_client(timeout=600)
    try:
        with open(_work_dir() / "image.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if mode != "local" and has_image(client, official):
                return RocketmqImage(official, version, True, rocketmq_home(version), "present",
                                     time.monotonic() - t0)
            base = base_tag()
            tag = None
            if mode != "official":
                files = _context_files(version)
                tag = local_tag(version, base, files)
                if has_image(client, tag):
                    return RocketmqImage(tag, version, False, rocketmq_home(version), "cached",
                                         time.monotonic() - t0)
            if mode != "local":
                why = try_pull(official)
                if why is None:
                    return RocketmqImage(official, version, True, rocketmq_home(version), "pulled",
                                         time.monotonic() - t0)
                if mode == "official":
                    raise ReferenceUnavailable(f"cannot pull {official}: {why}")
                log(f"cannot pull {official} ({why}); building {tag} locally")
            assert tag is not None
            if not has_image(client, base):
                tb = time.monotonic()
                build_base(client, base, log)
                log(f"base image {base}: {time.monotonic() - tb:.1f} s")
            tl = time.monotonic()
            build_local(client, tag, base, version, files)
            log(f"RocketMQ image {tag}: {time.monotonic() - tl:.1f} s")
            return RocketmqImage(tag, version, False, rocketmq_home(version), "built", time.monotonic() - t0)
    finally:
        client.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.reference.image", description=__doc__.split("\n\n")[0])
    parser.add_argument("version", nargs="?", default=jars.DEFAULT_VERSION)
    args = parser.parse_args(argv)
    try:
        image = ensure_image(args.version)
    except ReferenceUnavailable as exc:
        print(f"RocketMQ image unavailable: {exc}", file=sys.stderr)
        return 3
    print(f"RocketMQ image: {image.describe()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
