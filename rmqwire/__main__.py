"""``python -m rmqwire``: the main job.

- ``rmqwire namesrv [-c namesrv.properties] [-p]``: a NameServer (``mqnamesrv``'s options: ``-c``
  a properties file with the official keys, ``-p`` print the effective config and exit); it stops
  cleanly on SIGTERM / SIGINT.
- ``rmqwire broker [-c broker.conf] [-p]``: a Broker (``mqbroker``'s options, the official keys);
  it registers with ``namesrvAddr`` and stops cleanly (unregister, final flush) on SIGTERM / SIGINT.
- ``rmqwire standalone [--namesrv-port N] [--broker-port N] [--store-dir D] [-c broker.conf]
  [--namesrv-config namesrv.properties]``: a NameServer and a Broker in one process (127.0.0.1:9876
  and :10911 by default, store in ~/.rmqwire/standalone/store); the main job (``scripts/run.sh``).
- ``rmqwire exporter --namesrv 127.0.0.1:9876 [--port 5557] [--path /metrics] [--interval 60]
  [--accessKey AK --secretKey SK]``: rocketmq-exporter's metrics of a cluster for Prometheus
  (``rmqwire.metrics.exporter``), until SIGTERM / SIGINT.
- ``rmqwire demo``: builds the GET_ROUTEINFO_BY_TOPIC request a Java client sends, in both
  serialize types, and decodes it back.
"""

from __future__ import annotations

import argparse
import sys

from rmqwire.codec import (
    FrameDecoder,
    LanguageCode,
    RemotingCommand,
    RequestCode,
    SerializeType,
    encode_frame,
)


def demo(topic: str) -> int:
    cmd = RemotingCommand.request(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, opaque=7, language=LanguageCode.JAVA
    )
    decoder = FrameDecoder()
    for stype in SerializeType:
        frame = encode_frame(cmd, stype)
        (back,) = decoder.feed(frame)
        print(f"{stype.name:8} {len(frame):4} bytes  {frame.hex()}")
        print(f"{'':8} decoded: code={back.code} opaque={back.opaque} ext_fields={back.ext_fields}")
        if back != cmd:
            print("round trip mismatch", file=sys.stderr)
            return 1
    return 0


def namesrv(config_file: str | None, print_config: bool, log_level: str) -> int:
    """Run a NameServer until SIGTERM / SIGINT (or print its config with ``-p``)."""
    from rmqwire.server.namesrv import KVConfigError, NamesrvSettings

    try:
        settings = NamesrvSettings.load(config_file)
    except OSError as e:
        print(f"cannot read {config_file}: {e}", file=sys.stderr)
        return 255
    if config_file is not None:
        print(f"load config properties file OK, {config_file}", flush=True)
    if settings.ignored:
        print(f"ignored config values that do not parse: {', '.join(settings.ignored)}",
              file=sys.stderr)
    if print_config:
        settings.print_config(sys.stdout)
        return 0

    # Entry points alone resolve the global reactor.
    from twisted.internet import reactor
    from twisted.internet.error import CannotListenError
    from twisted.logger import (
        FilteringLogObserver,
        LogLevel,
        LogLevelFilterPredicate,
        globalLogBeginner,
        textFileLogObserver,
    )

    from rmqwire.server.namesrv import NameServer

    predicate = LogLevelFilterPredicate(defaultLogLevel=LogLevel.levelWithName(log_level))
    globalLogBeginner.beginLoggingTo(
        [FilteringLogObserver(textFileLogObserver(sys.stderr), [predicate])],
        redirectStandardIO=False,
    )
    try:
        server = NameServer(reactor, settings)   # TLS settings are checked here
    except ValueError as e:
        print(f"bad config in {config_file}: {e}", file=sys.stderr)
        return 255
    try:
        server.startService()
    except (CannotListenError, KVConfigError) as e:
        print(f"the NameServer did not start: {e}", file=sys.stderr)
        return 1
    print(f"The Name Server boot success. serializeType=JSON, address "
          f"{settings.server.bind_address}:{server.port}", flush=True)
    # reactor.run() turns SIGTERM / SIGINT into reactor.stop(); the service stops before shutdown.
    reactor.addSystemEventTrigger("before", "shutdown", server.stopService)
    reactor.run()
    return 0


def _begin_logging(log_level: str) -> None:
    from twisted.logger import (
        FilteringLogObserver,
        LogLevel,
        LogLevelFilterPredicate,
        globalLogBeginner,
        textFileLogObserver,
    )

    predicate = LogLevelFilterPredicate(defaultLogLevel=LogLevel.levelWithName(log_level))
    globalLogBeginner.beginLoggingTo(
        [FilteringLogObserver(textFileLogObserver(sys.stderr), [predicate])],
        redirectStandardIO=False,
    )


def broker(config_file: str | None, print_config: bool, log_level: str) -> int:
    """Run a Broker until SIGTERM / SIGINT (or print its config with ``-p``)."""
    from rmqwire.server.broker import BrokerSettings

    try:
        settings = BrokerSettings.load(config_file)
    except OSError as e:
        print(f"cannot read {config_file}: {e}", file=sys.stderr)
        return 255
    except ValueError as e:
        print(f"bad config in {config_file}: {e}", file=sys.stderr)
        return 255
    if config_file is not None:
        print(f"load config properties file OK, {config_file}", flush=True)
    if settings.ignored:
        print(f"ignored config values that do not parse: {', '.join(settings.ignored)}",
              file=sys.stderr)
    if print_config:
        settings.print_config(sys.stdout)
        return 0

    from twisted.internet import reactor
    from twisted.internet.error import CannotListenError

    from rmqwire.server.broker import Broker
    from rmqwire.server.store import StoreLoadError

    _begin_logging(log_level)
    try:
        service = Broker(reactor, settings)   # ACL files and TLS settings are checked here
    except ValueError as e:
        print(f"bad config in {config_file}: {e}", file=sys.stderr)
        return 255
    try:
        service.startService()
    except (CannotListenError, StoreLoadError, OSError) as e:
        print(f"the broker did not start: {e}", file=sys.stderr)
        return 1
    print(f"The broker[{settings.broker.broker_name}, {service.address}] boot success. "
          f"serializeType=JSON and name server is {settings.broker.namesrv_addr}", flush=True)
    print(f"store: {settings.store.store_path_root_dir}", flush=True)
    reactor.addSystemEventTrigger("before", "shutdown", service.stopService)
    reactor.run()
    return 0


def standalone(args: argparse.Namespace) -> int:
    """A NameServer and a Broker in one process, until SIGTERM / SIGINT."""
    from twisted.internet import reactor
    from twisted.internet.error import CannotListenError

    from rmqwire.server.namesrv import KVConfigError
    from rmqwire.server.standalone import Standalone, StandaloneOptions
    from rmqwire.server.store import StoreLoadError

    options = StandaloneOptions(
        namesrv_port=args.namesrv_port, broker_port=args.broker_port, store_dir=args.store_dir,
        broker_config=args.config_file, namesrv_config=args.namesrv_config,
    )
    try:
        service = Standalone(reactor, options)
    except (OSError, ValueError) as e:
        print(f"cannot read the configuration: {e}", file=sys.stderr)
        return 255
    _begin_logging(args.log_level)
    try:
        service.startService()
    except (CannotListenError, StoreLoadError, KVConfigError, OSError) as e:
        print(f"rmqwire standalone did not start: {e}", file=sys.stderr)
        return 1
    b = service.broker
    print(f"The Name Server boot success. serializeType=JSON, address {service.namesrv_addr}", flush=True)
    print(f"The broker[{b.settings.broker.broker_name}, {b.address}] boot success. serializeType=JSON "
          f"and name server is {service.namesrv_addr}", flush=True)
    print(f"rmqwire standalone: NameServer {service.namesrv_addr}, broker {b.address} "
          f"(cluster {b.settings.broker.broker_cluster_name}), store {service.store_dir}", flush=True)
    reactor.addSystemEventTrigger("before", "shutdown", service.stopService)
    reactor.run()
    return 0


def exporter(args: argparse.Namespace) -> int:
    """rocketmq-exporter's metrics of the cluster on ``--port``/``--path``, until SIGTERM / SIGINT."""
    import os

    from rmqwire.admin.blocking import remoting_config
    from rmqwire.metrics.exporter import CollectOptions, ExporterConfig, ExporterService

    namesrv = args.namesrv or os.environ.get("NAMESRV_ADDR") or "127.0.0.1:9876"
    try:
        rconf = remoting_config(timeout=args.timeout, access_key=args.access_key,
                                secret_key=args.secret_key)
    except ValueError as e:
        print(f"rmqwire exporter: {e}", file=sys.stderr)
        return 2
    if args.interval <= 0 or args.port < 0 or args.per_address < 1:
        print("rmqwire exporter: --interval must be > 0, --port >= 0, --per-address >= 1",
              file=sys.stderr)
        return 2
    config = ExporterConfig(
        namesrv_addr=namesrv, port=args.port, host=args.host, path=args.path,
        interval=args.interval, expire_after=args.expire, timeout=args.timeout,
        options=CollectOptions(per_address=args.per_address, lag_time=not args.no_lag_time,
                               client_metrics=not args.no_client_metrics),
    )
    from twisted.internet import reactor
    from twisted.internet.error import CannotListenError

    _begin_logging(args.log_level)
    service = ExporterService(reactor, config, rconf)
    try:
        service.startService()
    except CannotListenError as e:
        print(f"rmqwire exporter did not start: {e}", file=sys.stderr)
        return 1
    print(f"rmqwire exporter: http://{config.host}:{service.listening_port}{config.path} "
          f"(NameServer {namesrv}, every {config.interval:g} s)", flush=True)
    reactor.addSystemEventTrigger("before", "shutdown", service.stopService)
    reactor.run()
    return 0


def main(argv: list[str] | None = None) -> int:
    args_in = sys.argv[1:] if argv is None else argv
    if args_in[:1] == ["admin"]:  # ``python -m rmqwire admin ...`` is ``rmqadmin ...``
        from rmqwire.cli.main import main as rmqadmin

        return rmqadmin(args_in[1:])
    parser = argparse.ArgumentParser(prog="rmqwire", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    p_demo = sub.add_parser("demo", help="encode and decode a GET_ROUTEINFO_BY_TOPIC frame")
    p_demo.add_argument("--topic", default="TopicTest")
    p_ns = sub.add_parser("namesrv", help="run a NameServer (mqnamesrv)")
    p_ns.add_argument("-c", "--configFile", dest="config_file",
                      help="NameServer config properties file (the official keys)")
    p_ns.add_argument("-p", "--printConfigItem", dest="print_config", action="store_true",
                      help="print all config items and exit")
    p_ns.add_argument("--log-level", default="info",
                      choices=["debug", "info", "warn", "error", "critical"])
    p_broker = sub.add_parser("broker", help="run a Broker (mqbroker)")
    p_broker.add_argument("-c", "--configFile", dest="config_file",
                          help="Broker config properties file (the official keys)")
    p_broker.add_argument("-p", "--printConfigItem", dest="print_config", action="store_true",
                          help="print all config items and exit")
    p_broker.add_argument("--log-level", default="info",
                          choices=["debug", "info", "warn", "error", "critical"])
    p_sa = sub.add_parser("standalone", help="run a NameServer and a Broker in one process")
    p_sa.add_argument("--namesrv-port", type=int, default=None,
                      help="NameServer port (default 9876; 0: any free)")
    p_sa.add_argument("--broker-port", type=int, default=None,
                      help="Broker port (default 10911; its fast port is this - 2; 0: any free pair)")
    p_sa.add_argument("--store-dir", default=None,
                      help="store directory (default ~/.rmqwire/standalone/store)")
    p_sa.add_argument("-c", "--configFile", dest="config_file", help="broker.conf (official keys)")
    p_sa.add_argument("--namesrv-config", default=None, help="namesrv.properties (official keys)")
    p_sa.add_argument("--log-level", default="info",
                      choices=["debug", "info", "warn", "error", "critical"])
    p_ex = sub.add_parser("exporter", help="export the cluster's metrics to Prometheus "
                          "(rocketmq-exporter's names)")
    p_ex.add_argument("-n", "--namesrv", default=None,
                      help="NameServer addresses, host:port;host:port (default $NAMESRV_ADDR, "
                           "else 127.0.0.1:9876)")
    p_ex.add_argument("--port", type=int, default=5557, help="HTTP port (default 5557; 0: any)")
    p_ex.add_argument("--host", default="0.0.0.0", help="HTTP interface (default all)")
    p_ex.add_argument("--path", default="/metrics", help="scrape path (default /metrics)")
    p_ex.add_argument("--interval", type=float, default=60.0,
                      help="seconds between collection cycles (default 60)")
    p_ex.add_argument("--expire", type=float, default=60.0,
                      help="drop a series not refreshed for this many seconds (default 60, at "
                           "least two intervals)")
    p_ex.add_argument("--timeout", type=float, default=5.0, help="request timeout in seconds")
    p_ex.add_argument("--per-address", type=int, default=16,
                      help="requests in flight to one broker or NameServer (default 16)")
    p_ex.add_argument("--accessKey", "--access-key", dest="access_key", default=None,
                      help="ACL access key")
    p_ex.add_argument("--secretKey", "--secret-key", dest="secret_key", default=None,
                      help="ACL secret key")
    p_ex.add_argument("--no-lag-time", action="store_true",
                      help="skip rocketmq_group_get_latency_by_storetime (one pull per lagging queue)")
    p_ex.add_argument("--no-client-metrics", action="store_true",
                      help="skip rocketmq_client_* (one request per online consumer)")
    p_ex.add_argument("--log-level", default="info",
                      choices=["debug", "info", "warn", "error", "critical"])
    args = parser.parse_args(argv)
    if args.command == "exporter":
        return exporter(args)
    if args.command == "broker":
        return broker(args.config_file, args.print_config, args.log_level)
    if args.command == "standalone":
        return standalone(args)
    if args.command == "namesrv":
        return namesrv(args.config_file, args.print_config, args.log_level)
    return demo(getattr(args, "topic", "TopicTest"))


if __name__ == "__main__":
    sys.exit(main())
