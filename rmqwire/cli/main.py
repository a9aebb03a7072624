"""``rmqadmin``: mqadmin's commands, options and output, without a JVM; plus ``--json``.

``rmqadmin`` alone lists the commands, ``rmqadmin help CMD`` prints one command's options, and
``rmqadmin CMD [options]`` runs one (names match case-insensitively, as mqadmin's do). A failure
prints one line on stderr (what failed and why) and exits non-zero: 1 for a failed command, 2 for
a usage error (unknown command, missing or bad option), 130 on Ctrl-C.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from collections.abc import Sequence
from types import ModuleType

import click

PROG = "rmqadmin"


def _base() -> ModuleType:
    """``rmqwire.cli.base``, imported on first use: it imports the Admin API and with it Twisted,
    which must come after ``entry_point`` has hidden pyOpenSSL."""
    from rmqwire.cli import base

    return base

#: mqadmin's listing order (MQAdminStartup.initCommand); commands rmqadmin adds come after.
MQADMIN_ORDER = [
    "updateTopic", "updateTopicList", "deleteTopic", "updateSubGroup", "updateSubGroupList",
    "setConsumeMode", "deleteSubGroup", "updateBrokerConfig", "updateTopicPerm", "topicRoute",
    "topicStatus", "topicClusterList", "addBroker", "removeBroker", "resetMasterFlushOffset",
    "brokerStatus", "queryMsgById", "queryMsgByKey", "queryMsgByUniqueKey", "queryMsgByOffset",
    "QueryMsgTraceById", "printMsg", "printMsgByQueue", "sendMsgStatus", "brokerConsumeStats",
    "producerConnection", "consumerConnection", "consumerProgress", "consumerStatus",
    "cloneGroupOffset", "producer", "clusterList", "topicList", "updateKvConfig",
    "deleteKvConfig", "wipeWritePerm", "addWritePerm", "resetOffsetByTime",
    "skipAccumulatedMessage", "updateOrderConf", "cleanExpiredCQ", "deleteExpiredCommitLog",
    "cleanUnusedTopic", "startMonitoring", "statsAll", "allocateMQ", "checkMsgSendRT",
    "clusterRT", "getNamesrvConfig", "updateNamesrvConfig", "getBrokerConfig",
    "getConsumerConfig", "queryCq", "sendMessage", "consumeMessage",
]


#: The module declaring each command (lower-cased name or alias), so that a run imports only
#: the module of its command: start-up time is most of a short command's time.
MODULE_OF = {name.lower(): module for module, names in {
    "cluster": ["clusterList", "brokerStatus", "getBrokerConfig", "updateBrokerConfig",
                "brokerConsumeStats", "cleanExpiredCQ", "deleteExpiredCommitLog"],
    "topic": ["topicList", "topicRoute", "topicStatus", "topicClusterList", "allocateMQ",
              "updateTopic", "deleteTopic", "updateTopicPerm", "updateOrderConf"],
    "consumer": ["updateSubGroup", "deleteSubGroup", "getConsumerConfig", "consumerProgress",
                 "consumerConnection", "producerConnection", "consumerStatus",
                 "cloneGroupOffset", "resetOffsetByTime"],
    "message": ["queryMsgById", "queryMsgByKey", "queryMsgByUniqueKey", "queryMsgByOffset",
                "printMsg", "printMsgByQueue", "queryCq", "queryConsumeQueue"],
    "live": ["sendMessage", "consumeMessage", "tail", "produce"],
    "namesrv": ["updateKvConfig", "deleteKvConfig", "getNamesrvConfig", "updateNamesrvConfig",
                "wipeWritePerm", "addWritePerm"],
    "stats": ["statsAll"],
}.items() for name in names}


def _load_commands(name: str | None = None) -> None:
    """Import the module of command ``name`` (every command module when None or unknown), for
    its @command registrations."""
    module = MODULE_OF.get(name.lower()) if name else None
    for m in [module] if module else sorted(set(MODULE_OF.values())):
        importlib.import_module(f"rmqwire.cli.{m}")


class RmqadminGroup(click.Group):
    """Commands looked up case-insensitively (and by alias), listed in mqadmin's order."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        name = _base().LOOKUP.get(cmd_name.lower())
        return _base().REGISTRY.get(name) if name else None

    def list_commands(self, ctx: click.Context) -> list[str]:
        return ordered_names()

    def resolve_command(self, ctx: click.Context, args: list[str]):  # type: ignore[override]
        cmd = self.get_command(ctx, args[0])
        if cmd is None:
            raise click.UsageError(f"The sub command {args[0]} not exist.")
        return cmd.name, cmd, args[1:]


def ordered_names() -> list[str]:
    rank = {n: i for i, n in enumerate(MQADMIN_ORDER)}
    return sorted(_base().REGISTRY, key=lambda n: rank.get(n, len(rank)))


def command_list() -> str:
    lines = [f"The most commonly used {PROG} commands are:"]
    for name in ordered_names():
        lines.append(f"   {name:<35} {_base().REGISTRY[name].help}")
    lines.append("")
    lines.append(f"See '{PROG} help <command>' for more information on a specific command.")
    return "\n".join(lines) + "\n"


def _group(name: str | None = None) -> RmqadminGroup:
    _load_commands(name)
    return RmqadminGroup(name=PROG, commands=dict(_base().REGISTRY))


def one_line(text: str) -> str:
    """Errors and remarks can carry line breaks (Java appends FAQ links); keep one line."""
    return " ".join(part.strip() for part in str(text).splitlines() if part.strip())


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    # Twisted's log reaches stdlib logging through crochet; the one-line error is the report.
    logging.getLogger().addHandler(logging.NullHandler())
    group = _group(args[0] if args and args[0] != "help" else None)
    if not args:
        sys.stdout.write(command_list())
        return 0
    if args[0] == "help":
        if len(args) != 2:
            sys.stdout.write(command_list())
            return 0
        cmd = group.get_command(click.Context(group), args[1])
        if cmd is None:
            sys.stderr.write(f"{PROG}: The sub command {args[1]} not exist.\n")
            return 2
        with click.Context(cmd, info_name=f"{PROG} {cmd.name}",
                           help_option_names=["-h", "--help"]) as ctx:
            sys.stdout.write(cmd.get_help(ctx) + "\n")
        return 0
    name = args[0]
    try:
        group.main(args=args, prog_name=PROG, standalone_mode=False)
    except click.exceptions.Exit as e:  # --help
        return e.exit_code
    except click.UsageError as e:
        where = f" {e.ctx.command.name}" if e.ctx is not None and e.ctx.command is not group else ""
        sys.stderr.write(f"{PROG}{where}: {one_line(e.format_message())}\n")
        return 2
    except click.Abort:
        return 130
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except _base().CommandFailed as e:
        sys.stderr.write(f"{PROG} {_name(name)}: {one_line(str(e))}\n")
        return 1
    except Exception as e:  # never a traceback: one line saying what failed and why
        sys.stderr.write(f"{PROG} {_name(name)}: {describe(e)}\n")
        return 1
    return 0


def _name(given: str) -> str:
    return _base().LOOKUP.get(given.lower(), given)


def describe(e: BaseException) -> str:
    """``<ErrorType>: <message>`` on one line (the type says what kind of failure it was)."""
    from rmqwire.client.blocking import CallTimeoutError
    from rmqwire.errors import BrokerResponseError, RemotingError

    text = one_line(str(e)) or type(e).__name__
    if isinstance(e, (BrokerResponseError, CallTimeoutError)):
        return text
    if isinstance(e, RemotingError):
        return f"{text}"
    return f"{type(e).__name__}: {text}"


def entry_point() -> None:
    """The ``rmqadmin`` console script.

    Start-up is most of a short command's time, so two things are skipped: without ``--tls`` the
    pyOpenSSL package is hidden from this process (Twisted's TCP transport imports it for
    startTLS, which nothing here uses; TLS is only set up when asked for), and once the command
    has finished, closed its connections and flushed its output, the process exits at once
    instead of waiting for crochet's watchdog to notice the main thread ended.
    """
    args = sys.argv[1:]
    if "--tls" not in args and "OpenSSL" not in sys.modules:
        sys.modules["OpenSSL"] = None  # type: ignore[assignment]  # import OpenSSL: ImportError
    code = main(args)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        pass
    os._exit(code)


if __name__ == "__main__":
    entry_point()
