"""``python -m rmqwire``: the main job.

- ``rmqwire namesrv [-c namesrv.properties] [-p]``: a NameServer (``mqnamesrv``'s options: ``-c``
  a properties file with the official keys, ``-p`` print the effective config and exit); it stops
  cleanly on SIGTERM / SIGINT.
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
    server = NameServer(reactor, settings)
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
    args = parser.parse_args(argv)
    if args.command == "namesrv":
        return namesrv(args.config_file, args.print_config, args.log_level)
    return demo(getattr(args, "topic", "TopicTest"))


if __name__ == "__main__":
    sys.exit(main())
