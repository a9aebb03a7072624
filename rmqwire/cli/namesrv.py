"""NameServer commands: updateKvConfig, deleteKvConfig, getNamesrvConfig, updateNamesrvConfig,
wipeWritePerm, addWritePerm.

JSON documents: ``getNamesrvConfig`` {"nameServers": {addr: {key: value}}}; ``wipeWritePerm`` /
``addWritePerm`` {"brokerName", "nameServers": [{addr, ok, topicCount, error}]}; the others echo
what was written.
"""

from __future__ import annotations

import sys
from typing import Any

from rmqwire.admin.javautil import hashmap_order
from rmqwire.cli.base import Env, command, emit_json, opt, out
from rmqwire.cli.cluster import java_properties_order
from rmqwire.cli.javafmt import jstr, printf


@command("updateKvConfig", "Create or update KV config.")
@opt("-s", "--namespace", "namespace", "set the namespace", required=True)
@opt("-k", "--key", "key", "set the key name", required=True)
@opt("-v", "--value", "value", "set the key value", required=True)
def update_kv_config(env: Env, namespace: str, key: str, value: str) -> None:
    env.admin.create_and_update_kv_config(namespace, key, value)
    if env.json:
        emit_json({"namespace": namespace, "key": key, "value": value})
    else:
        out(printf("create or update kv config to namespace success.%n"))


@command("deleteKvConfig", "Delete KV config.")
@opt("-s", "--namespace", "namespace", "set the namespace", required=True)
@opt("-k", "--key", "key", "set the key name", required=True)
def delete_kv_config(env: Env, namespace: str, key: str) -> None:
    env.admin.delete_kv_config(namespace, key)
    if env.json:
        emit_json({"namespace": namespace, "key": key, "deleted": True})
    else:
        out(printf("delete kv config from namespace success.%n"))


@command("getNamesrvConfig", "Get configs of name server.")
def get_namesrv_config(env: Env) -> None:
    configs = env.admin.get_name_server_config(env.namesrv_list or None)
    doc: dict[str, Any] = {}
    for addr in hashmap_order(configs, 4):  # Java returns a HashMap(4) of NameServer -> config
        config = configs[addr]
        keys = java_properties_order(config)
        doc[addr] = {k: config[k] for k in keys}
        if not env.json:
            out(f"============{addr}============\n")
            for k in keys:
                out(printf("%-50s=  %s\n", k, config[k]))
    if env.json:
        emit_json({"nameServers": doc})


@command("updateNamesrvConfig", "Update configs of name server.")
@opt("-k", "--key", "key", "config key", required=True)
@opt("-v", "--value", "value", "config value", required=True)
def update_namesrv_config(env: Env, key: str, value: str) -> None:
    servers = env.namesrv_list or None
    env.admin.update_name_server_config({key: value}, servers)
    if env.json:
        emit_json({"nameServers": servers or env.admin.name_server_address_list, "key": key,
                   "value": value})
    else:
        out(printf("update name server config success!%s\n%s : %s\n",
                   "" if servers is None else jstr(servers), key, value))


def _write_perm(env: Env, broker_name: str, wipe: bool) -> None:
    verb = "wipe" if wipe else "add"
    results = []
    for addr in env.admin.name_server_address_list:
        try:
            if wipe:
                count = env.admin.wipe_write_perm_of_broker(addr, broker_name)
            else:
                count = env.admin.add_write_perm_of_broker(addr, broker_name)
        except Exception as e:  # mqadmin reports the failure and goes on with the next one
            results.append({"addr": addr, "ok": False, "topicCount": None, "error": str(e)})
            if not env.json:
                out(printf(f"{verb} write perm of broker[%s] in name server[%s] Failed%n",
                           broker_name, addr))
            sys.stderr.write(f"rmqadmin {verb}WritePerm: {addr}: {e}\n")
            continue
        results.append({"addr": addr, "ok": True, "topicCount": count, "error": None})
        if not env.json:
            out(printf(f"{verb} write perm of broker[%s] in name server[%s] OK, %d%n",
                       broker_name, addr, count))
    if env.json:
        emit_json({"brokerName": broker_name, "nameServers": results})


@command("wipeWritePerm", "Wipe write perm of broker in all name server you defined in the -n param.")
@opt("-b", "--brokerName", "broker_name", "broker name", required=True)
def wipe_write_perm(env: Env, broker_name: str) -> None:
    _write_perm(env, broker_name, True)


@command("addWritePerm", "Add write perm of broker in all name server you defined in the -n param.")
@opt("-b", "--brokerName", "broker_name", "broker name", required=True)
def add_write_perm(env: Env, broker_name: str) -> None:
    _write_perm(env, broker_name, False)
