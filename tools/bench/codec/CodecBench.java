import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.remoting.protocol.SerializeType;
import org.apache.rocketmq.remoting.protocol.header.SendMessageRequestHeaderV2;

/**
 * The Java half of tools/bench/codec: times the official RocketMQ classes on the exact inputs the
 * Python half wrote into a directory, and prints one JSON object on stdout.
 *
 * Usage: CodecBench DIR WARMUP_MS RUN_MS RUNS [OP ...]
 * DIR holds send_json.frame, send_rocketmq.frame (whole frames, length prefix included),
 * pull_body.bin (stored records), body.bin (the send body) and ext_fields.txt ("key=hex(value)").
 * One encoded frame of each header type is written back (java_send_*.frame) so the Python side can
 * check that both sides produce equivalent frames.
 */
public final class CodecBench {
    /** Consumed results, so the JIT cannot drop the work being timed. */
    static volatile long sink;

    static final long MIN_WARMUP_CALLS = 50_000;

    /** CPU time of the whole JVM (benchmark thread, GC and JIT threads), in nanoseconds. */
    static final com.sun.management.OperatingSystemMXBean OS =
        (com.sun.management.OperatingSystemMXBean) java.lang.management.ManagementFactory.getOperatingSystemMXBean();

    interface Op {
        /** Runs the operation once and returns something derived from its result. */
        long run() throws Exception;
    }

    static final class Result {
        final String name;
        final int itemsPerOp;
        final List<Double> runSeconds = new ArrayList<>();
        final List<Double> runCpuSeconds = new ArrayList<>();
        long opsPerRun;

        Result(String name, int itemsPerOp) {
            this.name = name;
            this.itemsPerOp = itemsPerOp;
        }
    }

    public static void main(String[] args) throws Exception {
        Path dir = Paths.get(args[0]);
        long warmupMs = Long.parseLong(args[1]);
        long runMs = Long.parseLong(args[2]);
        int runs = Integer.parseInt(args[3]);
        List<String> only = new ArrayList<>();
        for (int i = 4; i < args.length; i++) {
            only.add(args[i]);
        }

        byte[] jsonFrame = Files.readAllBytes(dir.resolve("send_json.frame"));
        byte[] rmqFrame = Files.readAllBytes(dir.resolve("send_rocketmq.frame"));
        byte[] pullBody = Files.readAllBytes(dir.resolve("pull_body.bin"));
        byte[] body = Files.readAllBytes(dir.resolve("body.bin"));
        Map<String, String> ext = readExtFields(dir.resolve("ext_fields.txt"));
        SendMessageRequestHeaderV2 header = headerOf(ext);

        checkDecode(jsonFrame, ext, body);
        checkDecode(rmqFrame, ext, body);
        int pulled = MessageDecoder.decodes(ByteBuffer.wrap(pullBody), true).size();
        if (pulled != 32) {
            throw new IllegalStateException("pull body decoded to " + pulled + " messages, expected 32");
        }
        Files.write(dir.resolve("java_send_json.frame"), toArray(encode(header, body, SerializeType.JSON)));
        Files.write(dir.resolve("java_send_rocketmq.frame"), toArray(encode(header, body, SerializeType.ROCKETMQ)));

        // The Netty encoder reuses a pooled buffer; one reused heap buffer stands in for it.
        ByteBuf out = Unpooled.buffer(4096);
        Map<String, Op> ops = new LinkedHashMap<>();
        ops.put("send_json.decode", () -> decode(jsonFrame));
        ops.put("send_json.encode", () -> encode(header, body, SerializeType.JSON).limit());
        ops.put("send_json.fast_encode", () -> fastEncode(header, body, SerializeType.JSON, out));
        ops.put("send_rocketmq.decode", () -> decode(rmqFrame));
        ops.put("send_rocketmq.encode", () -> encode(header, body, SerializeType.ROCKETMQ).limit());
        ops.put("send_rocketmq.fast_encode", () -> fastEncode(header, body, SerializeType.ROCKETMQ, out));
        ops.put("pull32.decode", () -> {
            List<MessageExt> msgs = MessageDecoder.decodes(ByteBuffer.wrap(pullBody), true);
            return msgs.size() + msgs.get(31).getBody().length;
        });

        List<Result> results = new ArrayList<>();
        for (Map.Entry<String, Op> e : ops.entrySet()) {
            if (!only.isEmpty() && !only.contains(e.getKey())) {
                continue;
            }
            int items = e.getKey().startsWith("pull32") ? 32 : 1;
            results.add(time(e.getKey(), items, e.getValue(), warmupMs, runMs, runs));
        }
        System.out.println(toJson(results));
    }

    static long decode(byte[] frame) throws Exception {
        // NettyDecoder strips the 4-byte length prefix before RemotingCommand.decode sees the frame.
        RemotingCommand cmd = RemotingCommand.decode(ByteBuffer.wrap(frame, 4, frame.length - 4));
        return cmd.getCode() + cmd.getExtFields().size() + cmd.getBody().length;
    }

    /** What the client does per send: a new command around the typed header, then encode(). */
    static ByteBuffer encode(SendMessageRequestHeaderV2 header, byte[] body, SerializeType type) {
        RemotingCommand cmd = RemotingCommand.createRequestCommand(310, header);
        cmd.setSerializeTypeCurrentRPC(type);
        cmd.setBody(body);
        return cmd.encode();
    }

    /** NettyEncoder's path: fastEncodeHeader into the outbound buffer, then the body bytes. */
    static long fastEncode(SendMessageRequestHeaderV2 header, byte[] body, SerializeType type, ByteBuf out) {
        RemotingCommand cmd = RemotingCommand.createRequestCommand(310, header);
        cmd.setSerializeTypeCurrentRPC(type);
        cmd.setBody(body);
        out.clear();
        cmd.fastEncodeHeader(out);
        out.writeBytes(body);
        return out.writerIndex();
    }

    static Result time(String name, int items, Op op, long warmupMs, long runMs, int runs) throws Exception {
        Result r = new Result(name, items);
        long acc = 0;
        long count = 0;
        long start = System.nanoTime();
        long warmupNs = warmupMs * 1_000_000L;
        // Time alone is not enough on a busy box: also insist on enough calls for C2 to compile.
        while (System.nanoTime() - start < warmupNs || count < MIN_WARMUP_CALLS) {
            for (int i = 0; i < 100; i++) {
                acc += op.run();
            }
            count += 100;
        }
        double perOpNs = (double) (System.nanoTime() - start) / Math.max(count, 1);
        long n = Math.max(100, (long) (runMs * 1_000_000L / perOpNs));
        r.opsPerRun = n;
        for (int k = 0; k < runs; k++) {
            long c0 = OS.getProcessCpuTime();
            long t0 = System.nanoTime();
            for (long i = 0; i < n; i++) {
                acc += op.run();
            }
            long t1 = System.nanoTime();
            r.runCpuSeconds.add((OS.getProcessCpuTime() - c0) / 1e9);
            r.runSeconds.add((t1 - t0) / 1e9);
        }
        sink = acc;
        return r;
    }

    static void checkDecode(byte[] frame, Map<String, String> ext, byte[] body) throws Exception {
        RemotingCommand cmd = RemotingCommand.decode(ByteBuffer.wrap(frame, 4, frame.length - 4));
        if (cmd.getCode() != 310 || !ext.equals(cmd.getExtFields())
            || !java.util.Arrays.equals(body, cmd.getBody())) {
            throw new IllegalStateException("input frame does not decode to the expected SEND_MESSAGE_V2: "
                + cmd + " ext=" + cmd.getExtFields());
        }
    }

    static Map<String, String> readExtFields(Path path) throws Exception {
        Map<String, String> ext = new HashMap<>();
        for (String line : Files.readAllLines(path, StandardCharsets.UTF_8)) {
            if (line.isEmpty()) {
                continue;
            }
            int eq = line.indexOf('=');
            ext.put(line.substring(0, eq), new String(unhex(line.substring(eq + 1)), StandardCharsets.UTF_8));
        }
        return ext;
    }

    /** The typed header, filled by its own FastCodesHeader decoder (n has no public setter). */
    static SendMessageRequestHeaderV2 headerOf(Map<String, String> ext) throws Exception {
        SendMessageRequestHeaderV2 h = new SendMessageRequestHeaderV2();
        h.decode(new HashMap<>(ext));
        return h;
    }

    static byte[] toArray(ByteBuffer bb) {
        byte[] a = new byte[bb.remaining()];
        bb.duplicate().get(a);
        return a;
    }

    static byte[] unhex(String s) {
        byte[] b = new byte[s.length() / 2];
        for (int i = 0; i < b.length; i++) {
            b[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
        }
        return b;
    }

    static String toJson(List<Result> results) {
        StringBuilder sb = new StringBuilder();
        sb.append("{\"java_version\":\"").append(System.getProperty("java.version"))
            .append("\",\"vm\":\"").append(System.getProperty("java.vm.name"))
            .append("\",\"available_processors\":").append(Runtime.getRuntime().availableProcessors())
            .append(",\"max_heap_bytes\":").append(Runtime.getRuntime().maxMemory())
            .append(",\"results\":[");
        for (int i = 0; i < results.size(); i++) {
            Result r = results.get(i);
            if (i > 0) {
                sb.append(',');
            }
            sb.append("{\"name\":\"").append(r.name).append("\",\"items_per_op\":").append(r.itemsPerOp)
                .append(",\"ops_per_run\":").append(r.opsPerRun).append(",\"run_seconds\":[");
            for (int k = 0; k < r.runSeconds.size(); k++) {
                if (k > 0) {
                    sb.append(',');
                }
                sb.append(r.runSeconds.get(k));
            }
            sb.append("],\"run_cpu_seconds\":[");
            for (int k = 0; k < r.runCpuSeconds.size(); k++) {
                if (k > 0) {
                    sb.append(',');
                }
                sb.append(r.runCpuSeconds.get(k));
            }
            sb.append("]}");
        }
        sb.append("]}");
        return sb.toString();
    }
}
