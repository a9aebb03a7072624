"""``python -m rmqwire``: the main job.

Until the standalone NameServer + Broker land, the main job demonstrates the codec: it builds the
GET_ROUTEINFO_BY_TOPIC request a Java client sends, in both serialize types, and decodes it back.
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rmqwire", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    p_demo = sub.add_parser("demo", help="encode and decode a GET_ROUTEINFO_BY_TOPIC frame")
    p_demo.add_argument("--topic", default="TopicTest")
    args = parser.parse_args(argv)
    return demo(getattr(args, "topic", "TopicTest"))


if __name__ == "__main__":
    sys.exit(main())
