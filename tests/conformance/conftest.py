"""Fixtures running the official Apache RocketMQ as the reference peer.

Backend of ``reference_cluster`` (and ``reference_cluster_v4``): env RMQWIRE_REFERENCE_BACKEND =
jvm (default: official jars from Maven Central as JVM processes, JDK 17) or docker (the same release
in containers through testcontainers: apache/rocketmq:<version>, or the image tools.reference.image
builds locally). scripts/test.sh runs the suite with jvm, then the codec/remoting and peer tests
again with docker. ``docker_reference_cluster`` is always the container backend (the session's
cluster when that is docker). ``reference_cluster_factory`` always starts JVM clusters. Version:
--rocketmq-version, else env RMQWIRE_ROCKETMQ_VERSION, else 5.3.3. The 4.x reference (4.9.7) is a
separate fixture for tests marked ``slow``.

A missing JDK / Maven / jar skips with the reason, except under CI=true, where it fails: the
conformance suite must not pass silently in CI. A missing Docker engine (or image) skips with the
reason; under CI=true it fails only where Docker is expected to work, i.e. when the test command
got an engine answering (scripts/test.sh exports RMQWIRE_DOCKER_EXPECTED=1 after setup). A
cluster that is available but does not start is always an error.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.conformance.prometheus_helpers import prometheus, prometheus_module  # noqa: F401 (fixtures)
from tools.reference import jars
from tools.reference.jars import ReferenceUnavailable

BACKENDS = ("jvm", "docker")


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def _docker_expected() -> bool:
    return os.environ.get("RMQWIRE_DOCKER_EXPECTED", "") == "1"


def reference_unavailable(reason: str, *, docker: bool = False) -> None:
    """Skip with the reason; fail instead under CI=true (for Docker only where it is expected)."""
    if _in_ci() and (not docker or _docker_expected()):
        pytest.fail(f"reference cluster unavailable in CI: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(name="reference_unavailable", scope="session")
def reference_unavailable_fixture() -> Callable[[str], None]:
    """The skip-or-fail-in-CI policy, for tests that start an official tool themselves."""
    return reference_unavailable


def pytest_report_header(config: pytest.Config) -> str:
    return (f"reference backend: {os.environ.get('RMQWIRE_REFERENCE_BACKEND', 'jvm')} "
            f"(RMQWIRE_REFERENCE_BACKEND); docker expected: {_docker_expected()}")


def reference_version(config: pytest.Config) -> str:
    return (config.getoption("--rocketmq-version") or os.environ.get("RMQWIRE_ROCKETMQ_VERSION")
            or "5.3.3")


def _backend() -> str:
    backend = os.environ.get("RMQWIRE_REFERENCE_BACKEND", "jvm").lower()
    if backend not in BACKENDS:
        raise pytest.UsageError(f"RMQWIRE_REFERENCE_BACKEND must be one of {BACKENDS}, not {backend!r}")
    return backend


def _start(version: str, backend: str = "jvm") -> Any:
    if backend == "docker":
        from tools.reference.docker_cluster import DockerReferenceCluster

        try:
            return DockerReferenceCluster(version=version).start()
        except ReferenceUnavailable as exc:   # no engine, or no image (no registry, no debootstrap)
            reference_unavailable(str(exc), docker=True)
    from tools.reference.cluster import ReferenceCluster

    try:
        return ReferenceCluster(version=version).start()
    except ReferenceUnavailable as exc:
        reference_unavailable(str(exc))


def _announce(request: pytest.FixtureRequest, backend: str, cluster: Any) -> None:
    """One line in the test log with what started and how long each stage took."""
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    stages = ", ".join(f"{k} {v:.1f}" for k, v in cluster.timings.items())
    extra = ""
    if backend == "docker":
        extra = f"; image {cluster.image.describe()}; Ryuk: {cluster.ryuk}"
    line = f"reference cluster ({backend}, RocketMQ {cluster.version}) started: {stages}{extra}"
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if capture is None:
        reporter.write_line(line)
        return
    with capture.global_and_fixture_disabled():   # fixture set-up output is captured otherwise
        reporter.ensure_newline()
        reporter.write_line(line)


@pytest.fixture(scope="session")
def reference_cluster(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The official NameServer + Broker (``.namesrv_addr``, ``.broker_addr``, ``.broker_name``,
    ``.cluster_name``, ``.version``, ``.lib_dir``, ``.add_broker(name)``), shared by the session.

    Do not add brokers to it (other tests assume one broker); use reference_cluster_factory.
    """
    cluster = _start(reference_version(request.config), _backend())
    try:
        _announce(request, _backend(), cluster)
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def docker_reference_cluster(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The container backend (NameServer and Broker containers), whatever the session's backend."""
    if _backend() == "docker":
        yield request.getfixturevalue("reference_cluster")
        return
    cluster = _start(reference_version(request.config), "docker")
    try:
        _announce(request, "docker", cluster)
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def reference_cluster_v4(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The 4.x reference (4.9.7: 4.9.8's server jars are not on Maven Central). For ``slow`` tests."""
    version = os.environ.get("RMQWIRE_ROCKETMQ_V4_VERSION", jars.REFERENCE_4X)
    cluster = _start(version, _backend())
    try:
        _announce(request, _backend(), cluster)
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def reference_cluster_factory(request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
    """Start private JVM clusters (``factory(version=None, **kwargs)``); all are stopped afterwards."""
    started: list[Any] = []

    def factory(version: str | None = None, **kwargs: Any) -> Any:
        from tools.reference.cluster import ReferenceCluster

        cluster = ReferenceCluster(version=version or reference_version(request.config), **kwargs)
        try:
            cluster.start()
        except ReferenceUnavailable as exc:
            reference_unavailable(str(exc))
        started.append(cluster)
        return cluster

    try:
        yield factory
    finally:
        for cluster in started:
            cluster.stop()
