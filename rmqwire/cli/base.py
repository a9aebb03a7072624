"""What every rmqadmin command shares: the registry, common options, the admin client, output.

A command module declares each command with ``@command(name, description)`` and click options
(mqadmin's short and long names); the decorator adds the common options (``-n/--namesrvAddr``,
``--json``, ACL, TLS, ``--timeout``, ``--progress``) and hands the function an ``Env``. The text a
command prints is built with ``javafmt.printf`` next to the command, so it reads like the Java it
reproduces; ``--json`` prints one JSON document built from the same typed results instead.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click

from rmqwire.admin.blocking import NAMESRV_ADDR_ENV, Admin
from rmqwire.admin.core import DEFAULT_TIMEOUT

#: Commands in the order ``rmqadmin`` lists them (mqadmin's order), by group module.
REGISTRY: dict[str, click.Command] = {}
#: lower-cased name or alias -> the command's name.
LOOKUP: dict[str, str] = {}
#: mqadmin's tools.yml, under ROCKETMQ_HOME (``MixAll.ACL_CONF_TOOLS_FILE``).
TOOLS_YML = "conf/tools.yml"


class CommandFailed(Exception):
    """A command cannot go on; the message is printed as one line (what failed and why)."""


@dataclasses.dataclass
class Env:
    """The common options of one run and the admin client they describe (started on first use)."""

    command: str
    namesrv_addr: str | None
    json: bool
    access_key: str | None
    secret_key: str | None
    tls: bool
    timeout: float
    progress: bool
    _admin: Admin | None = None

    @property
    def admin(self) -> Admin:
        if self._admin is None:
            if not self.namesrv_addr:
                raise CommandFailed(
                    f"no NameServer address: give -n host:port or set {NAMESRV_ADDR_ENV}")
            self._admin = Admin(self.namesrv_addr, access_key=self.access_key,
                                secret_key=self.secret_key, tls=self.tls or None,
                                timeout=self.timeout, wait=max(60.0, self.timeout * 12)).start()
        return self._admin

    def producer(self, group: str, **options: Any) -> Any:
        """An unstarted ``rmqwire.Producer`` signed and connected as this run's admin client
        (``options``: more ``Producer`` options, e.g. ``instance_name``, ``unit_name``)."""
        from rmqwire import Producer

        if self.access_key:
            options.update(access_key=self.access_key, secret_key=self.secret_key)
        if self.tls:
            options["use_tls"] = True
        if not self.namesrv_addr:
            raise CommandFailed(f"no NameServer address: give -n host:port or set {NAMESRV_ADDR_ENV}")
        return Producer(group, namesrv_addr=self.namesrv_addr, **options)

    @property
    def namesrv_list(self) -> list[str]:
        return [a for a in (self.namesrv_addr or "").strip().split(";") if a]

    def close(self) -> None:
        if self._admin is not None:
            admin, self._admin = self._admin, None
            with contextlib.suppress(Exception):
                admin.shutdown()

    @contextlib.contextmanager
    def progress_bar(self, description: str, total: int | None) -> Iterator[Callable[[int], None]]:
        """A rich progress bar on stderr when stderr is a terminal or ``--progress`` was given;
        yields ``advance(n)`` (a no-op without a bar)."""
        if not (self.progress or sys.stderr.isatty()):
            yield lambda n=1: None
            return
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        console = Console(stderr=True, force_terminal=self.progress or None)
        # Rich sends what is printed meanwhile through its console (stderr) to keep the bar whole:
        # right on a terminal, wrong when stdout is a pipe or file, which must get every line.
        on_terminal = sys.stdout.isatty()
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                      console=console, transient=True, redirect_stdout=on_terminal,
                      redirect_stderr=on_terminal) as bar:
            task = bar.add_task(description, total=total)
            yield lambda n=1: bar.advance(task, n)


def out(text: str) -> None:
    """Write text exactly as given (mqadmin's printf output carries its own line breaks)."""
    sys.stdout.write(text)


def emit_json(doc: Any) -> None:
    """The one JSON document of a ``--json`` run."""
    sys.stdout.write(json.dumps(doc, indent=2, ensure_ascii=False, default=_json_default) + "\n")


def _json_default(v: Any) -> Any:
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return dataclasses.asdict(v)
    if hasattr(v, "name") and hasattr(v, "value"):  # enums by name, as fastjson writes them
        return v.name
    if isinstance(v, (set, frozenset)):
        return sorted(v)
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    raise TypeError(f"{type(v).__name__} is not JSON serialisable")


def tools_yml_credentials() -> tuple[str | None, str | None]:
    """accessKey/secretKey of ``$ROCKETMQ_HOME/conf/tools.yml``, as mqadmin loads them."""
    home = os.environ.get("ROCKETMQ_HOME")
    if not home:
        return None, None
    path = Path(home) / TOOLS_YML
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None, None
    found: dict[str, str] = {}
    for line in text.splitlines():
        m = re.match(r"^\s*(accessKey|secretKey)\s*:\s*(.*?)\s*$", line)
        if m:
            value = m.group(2).split(" #")[0].strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            found[m.group(1)] = value
    ak, sk = found.get("accessKey", "").strip(), found.get("secretKey", "").strip()
    return (ak, sk) if ak and sk else (None, None)


_COMMON = [
    click.option("-n", "--namesrvAddr", "namesrv_addr", metavar="<addr;addr>",
                 help=f"Name server address list, eg: '192.168.0.1:9876;192.168.0.2:9876' "
                      f"(default: ${NAMESRV_ADDR_ENV})"),
    click.option("--json", "as_json", is_flag=True,
                 help="Print one JSON document instead of mqadmin's text"),
    click.option("--accessKey", "access_key", metavar="<ak>",
                 help="ACL access key (default: $ROCKETMQ_HOME/conf/tools.yml)"),
    click.option("--secretKey", "secret_key", metavar="<sk>", help="ACL secret key"),
    click.option("--tls", "tls", is_flag=True, help="Connect with TLS"),
    click.option("--timeout", "timeout", type=float, default=DEFAULT_TIMEOUT, show_default=True,
                 help="Seconds each request may take"),
    click.option("--progress", "progress", is_flag=True,
                 help="Show progress bars on stderr even when it is not a terminal"),
]


def command(name: str, description: str, *, aliases: tuple[str, ...] = (),
            namesrv: bool = True) -> Callable[[Callable[..., Any]], click.Command]:
    """Register an rmqadmin command; the function is called as ``fn(env, **options)``."""

    def decorate(fn: Callable[..., Any]) -> click.Command:
        def callback(namesrv_addr: str | None, as_json: bool, access_key: str | None,
                     secret_key: str | None, tls: bool, timeout: float, progress: bool,
                     **options: Any) -> Any:
            if bool(access_key) != bool(secret_key):
                raise click.UsageError("--accessKey and --secretKey go together")
            if not access_key:
                access_key, secret_key = tools_yml_credentials()
            addr = (namesrv_addr or os.environ.get(NAMESRV_ADDR_ENV) or "").strip() or None
            env = Env(name, addr, as_json, access_key, secret_key, tls, timeout, progress)
            try:
                return fn(env, **options)
            finally:
                env.close()

        params = list(getattr(fn, "__click_params__", []))
        params.reverse()  # click stores decorator params innermost first
        cmd = click.Command(name, callback=callback, params=params, help=description,
                            short_help=description, add_help_option=True,
                            context_settings={"help_option_names": ["-h", "--help"]})
        for deco in _COMMON:  # applied to a Command, click.option appends the parameter
            cmd = deco(cmd)  # type: ignore[assignment]
        if not namesrv:
            cmd.params = [p for p in cmd.params if p.name != "namesrv_addr"]
        REGISTRY[name] = cmd
        for alias in (name, *aliases):
            LOOKUP[alias.lower()] = name
        return cmd

    return decorate


def opt(short: str, long: str, dest: str, help_text: str, *, required: bool = False,
        flag: bool = False, metavar: str = "<arg>") -> Callable[[Any], Any]:
    """An mqadmin option: ``-x``/``--long`` taking one value (trimmed, as mqadmin trims), or a flag."""
    names = [n for n in (short, long) if n]
    if flag:
        return click.option(*names, dest, is_flag=True, help=help_text)
    return click.option(*names, dest, required=required, help=help_text, metavar=metavar,
                        callback=_trim)


def _trim(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    return value.strip() if isinstance(value, str) else value


def parse_bool(value: str | None, default: bool = False) -> bool:
    """``Boolean.parseBoolean``: true only for "true" in any case."""
    if value is None:
        return default
    return value.strip().lower() == "true"


def parse_int(value: str, what: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise CommandFailed(f"{what} must be an integer, not {value!r}") from None
