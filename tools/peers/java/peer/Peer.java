/*
 * rmqwire interop peer: a small command-line wrapper around the official Apache RocketMQ Java client.
 *
 * Conformance tests drive it as a subprocess and read one JSON object per line from stdout:
 * one line per message sent or received, plus {"event": ...} lines for lifecycle milestones.
 * Everything else the client library prints is diverted to stderr, so stdout stays machine-readable.
 *
 *   Peer produce --namesrv A --topic T --count N [--mode sync|async|oneway|batch|ordered|delay|timer|transactional]
 *                [--tag X] [--keys K] [--prop k=v ...] [--body-size B | --body TEXT] [--compress] [--group G]
 *                [--queue Q] [--delay-level L] [--tx-state commit|rollback|unknown] [--batch-size S]
 *                [--timer-ms D] [--timer-kind deliver|sec|ms] [--send-timeout-ms T] [--api-timeout-ms T]
 *                [--interval-ms M]   (sync modes: a pause between sends, for steady traffic)
 *   Peer consume --namesrv A --topic T --count N [--mode push|litepull] [--model cluster|broadcast] [--orderly]
 *                [--group G] [--from first|last] [--timeout-ms M] [--sub EXPR] [--fail-times R]
 *                [--max-reconsume N]
 *   (produce and push consume) [--access-key AK --secret-key SK]: sign requests (AclClientRPCHook);
 *   [--api-timeout-ms M]: the client's mqClientApiTimeout (NameServer calls; default 15000 here)
 *   TLS: jvm_args ["-Dtls.enable=true"] (the client's TlsSystemConfig)
 *
 * Mode timer sends 5.x timer messages due D ms after the send: setDeliverTimeMs(now + D) (deliver),
 * setDelayTimeSec(D / 1000) (sec) or setDelayTimeMs(D) (ms).
 *
 * "{i}" in --body, --keys, --tag and --prop values is replaced by the message index, so each message
 * of a run can be told apart. Exit codes: 0 ok, 2 usage or client error, 3 consume timeout.
 */

import com.alibaba.fastjson.JSON;
import com.alibaba.fastjson.JSONObject;
import com.alibaba.fastjson.serializer.SerializerFeature;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageClientExt;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.RPCHook;

public final class Peer {

    /** The real stdout, reserved for JSON lines; System.out is pointed at stderr. */
    private static PrintStream out;

    private Peer() {
    }

    public static void main(String[] args) {
        out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
        System.setOut(System.err);
        int rc;
        try {
            if (args.length == 0) {
                throw new IllegalArgumentException("usage: Peer produce|consume --namesrv A --topic T ...");
            }
            Opts o = Opts.parse(args, 1);
            switch (args[0]) {
                case "produce":
                    rc = produce(o);
                    break;
                case "consume":
                    rc = consume(o);
                    break;
                default:
                    throw new IllegalArgumentException("unknown command " + args[0]);
            }
        } catch (IllegalArgumentException e) {
            System.err.println("peer: " + e.getMessage());
            rc = 2;
        } catch (Throwable t) {
            t.printStackTrace(System.err);
            emitEvent("error", "message", String.valueOf(t));
            rc = 2;
        }
        out.flush();
        // Client libraries leave non-daemon threads behind; we have already shut them down cleanly.
        Runtime.getRuntime().halt(rc);
    }

    // ------------------------------------------------------------------ options

    static final class Opts {
        final Map<String, String> single = new LinkedHashMap<>();
        final List<String> props = new ArrayList<>();
        boolean compress;
        boolean orderly;

        static Opts parse(String[] a, int from) {
            Opts o = new Opts();
            for (int i = from; i < a.length; i++) {
                String k = a[i];
                if (!k.startsWith("--")) {
                    throw new IllegalArgumentException("unexpected argument " + k);
                }
                String name = k.substring(2);
                if (name.equals("compress")) {
                    o.compress = true;
                    continue;
                }
                if (name.equals("orderly")) {
                    o.orderly = true;
                    continue;
                }
                if (i + 1 >= a.length) {
                    throw new IllegalArgumentException("missing value for " + k);
                }
                String v = a[++i];
                if (name.equals("prop")) {
                    if (v.indexOf('=') <= 0) {
                        throw new IllegalArgumentException("--prop needs k=v, got " + v);
                    }
                    o.props.add(v);
                } else {
                    o.single.put(name, v);
                }
            }
            return o;
        }

        String req(String name) {
            String v = single.get(name);
            if (v == null) {
                throw new IllegalArgumentException("--" + name + " is required");
            }
            return v;
        }

        String get(String name, String dflt) {
            return single.getOrDefault(name, dflt);
        }

        int getInt(String name, int dflt) {
            String v = single.get(name);
            try {
                return v == null ? dflt : Integer.parseInt(v);
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("--" + name + " needs an integer, got " + v);
            }
        }
    }

    /** --access-key AK --secret-key SK: sign every request as AclClientRPCHook does (else null: unsigned). */
    private static RPCHook aclHook(Opts o) {
        String ak = o.single.get("access-key");
        if (ak == null) {
            return null;
        }
        return new AclClientRPCHook(new SessionCredentials(ak, o.req("secret-key")));
    }

    // ------------------------------------------------------------------ produce

    private static Message buildMessage(Opts o, String topic, int i) {
        byte[] body;
        if (o.single.containsKey("body")) {
            body = subst(o.single.get("body"), i).getBytes(StandardCharsets.UTF_8);
        } else if (o.single.containsKey("body-size")) {
            body = patternBody(o.getInt("body-size", 0), i);
        } else {
            body = ("hello-" + i).getBytes(StandardCharsets.UTF_8);
        }
        Message m = new Message(topic, body);
        if (o.single.containsKey("tag")) {
            m.setTags(subst(o.single.get("tag"), i));
        }
        if (o.single.containsKey("keys")) {
            m.setKeys(subst(o.single.get("keys"), i));
        }
        for (String kv : o.props) {
            int eq = kv.indexOf('=');
            m.putUserProperty(kv.substring(0, eq), subst(kv.substring(eq + 1), i));
        }
        return m;
    }

    /** Printable, index-dependent filler so that equal sizes still give distinct bodies. */
    static byte[] patternBody(int size, int index) {
        byte[] prefix = ("body-" + index + "-").getBytes(StandardCharsets.US_ASCII);
        byte[] b = new byte[size];
        for (int j = 0; j < size; j++) {
            b[j] = j < prefix.length ? prefix[j] : (byte) ('a' + (j * 7 + index) % 26);
        }
        return b;
    }

    private static String subst(String s, int i) {
        return s.replace("{i}", Integer.toString(i));
    }

    private static int produce(Opts o) throws Exception {
        String namesrv = o.req("namesrv");
        String topic = o.req("topic");
        int count = o.getInt("count", 1);
        String mode = o.get("mode", "sync");
        String group = o.get("group", "rmqwire_peer_producer_" + ProcessHandle.current().pid());
        String txState = o.get("tx-state", "commit");
        if (!java.util.Arrays.asList("sync", "async", "oneway", "batch", "ordered", "delay", "timer", "transactional")
            .contains(mode)) {
            throw new IllegalArgumentException("unknown produce mode " + mode);
        }

        DefaultMQProducer producer;
        if (mode.equals("transactional")) {
            TransactionMQProducer tp = new TransactionMQProducer(group, aclHook(o));
            final LocalTransactionState local = txState(txState);
            tp.setTransactionListener(new TransactionListener() {
                @Override
                public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                    return local;
                }

                @Override
                public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                    // A check-back only happens for UNKNOW; resolve it to commit so the test can see it.
                    emitEvent("check", "msgId", msg.getMsgId());
                    return LocalTransactionState.COMMIT_MESSAGE;
                }
            });
            producer = tp;
        } else {
            producer = new DefaultMQProducer(group, aclHook(o));
        }
        producer.setNamesrvAddr(namesrv);
        // A cold JVM on a loaded machine needs seconds for its first connections (the client's
        // default is 3 s); --api-timeout-ms overrides it.
        producer.setMqClientApiTimeout(o.getInt("api-timeout-ms", 15000));
        // Without --compress keep bodies raw, so body checks on the consumer side see the sent bytes.
        producer.setCompressMsgBodyOverHowmuch(o.compress ? 4 * 1024 : Integer.MAX_VALUE);
        producer.setSendMsgTimeout(o.getInt("send-timeout-ms", 5000));
        long t0 = System.nanoTime();
        producer.start();
        emitEvent("started", "startMs", (System.nanoTime() - t0) / 1_000_000);

        int failures = 0;
        final int intervalMs = o.getInt("interval-ms", 0);
        try {
            switch (mode) {
                case "sync":
                case "timer":
                case "delay":
                case "ordered":
                case "transactional":
                    for (int i = 0; i < count; i++) {
                        Message m = buildMessage(o, topic, i);
                        SendResult r;
                        if (mode.equals("delay")) {
                            m.setDelayTimeLevel(o.getInt("delay-level", 1));
                            r = producer.send(m);
                        } else if (mode.equals("timer")) {
                            long d = o.getInt("timer-ms", 1000);
                            String kind = o.get("timer-kind", "deliver");
                            if (kind.equals("sec")) {
                                setLong(m, "setDelayTimeSec", d / 1000);
                            } else if (kind.equals("ms")) {
                                setLong(m, "setDelayTimeMs", d);
                            } else {
                                setLong(m, "setDeliverTimeMs", System.currentTimeMillis() + d);
                            }
                            r = producer.send(m);
                        } else if (mode.equals("ordered")) {
                            // --queue -1: message i goes to queue i % n (a fixed spread over the queues)
                            final int q = o.getInt("queue", 0);
                            r = producer.send(m, (mqs, msg, arg) -> mqs.get((q < 0 ? (Integer) arg : q) % mqs.size()), i);
                        } else if (mode.equals("transactional")) {
                            r = ((TransactionMQProducer) producer).sendMessageInTransaction(m, null);
                        } else {
                            r = producer.send(m);
                        }
                        emitSent(i, m, r);
                        if (intervalMs > 0) {
                            Thread.sleep(intervalMs);
                        }
                    }
                    break;
                case "async":
                    failures = produceAsync(producer, o, topic, count);
                    break;
                case "oneway":
                    for (int i = 0; i < count; i++) {
                        Message m = buildMessage(o, topic, i);
                        producer.sendOneway(m);
                        emitSent(i, m, null);
                    }
                    break;
                case "batch":
                    produceBatch(producer, o, topic, count);
                    break;
                default:
                    throw new IllegalArgumentException("unknown produce mode " + mode);
            }
        } finally {
            producer.shutdown();
        }
        emitEvent("done", "elapsedMs", (System.nanoTime() - t0) / 1_000_000);
        return failures == 0 ? 0 : 2;
    }

    private static LocalTransactionState txState(String s) {
        switch (s) {
            case "commit":
                return LocalTransactionState.COMMIT_MESSAGE;
            case "rollback":
                return LocalTransactionState.ROLLBACK_MESSAGE;
            case "unknown":
                return LocalTransactionState.UNKNOW;
            default:
                throw new IllegalArgumentException("--tx-state must be commit|rollback|unknown");
        }
    }

    private static int produceAsync(DefaultMQProducer producer, Opts o, String topic, int count)
        throws InterruptedException {
        CountDownLatch done = new CountDownLatch(count);
        AtomicInteger failed = new AtomicInteger();
        for (int i = 0; i < count; i++) {
            final int idx = i;
            final Message m = buildMessage(o, topic, i);
            try {
                producer.send(m, new SendCallback() {
                    @Override
                    public void onSuccess(SendResult r) {
                        emitSent(idx, m, r);
                        done.countDown();
                    }

                    @Override
                    public void onException(Throwable e) {
                        failed.incrementAndGet();
                        emitEvent("send-failed", "index", idx, "message", String.valueOf(e));
                        done.countDown();
                    }
                });
            } catch (Exception e) {
                failed.incrementAndGet();
                emitEvent("send-failed", "index", idx, "message", String.valueOf(e));
                done.countDown();
            }
        }
        if (!done.await(60, TimeUnit.SECONDS)) {
            emitEvent("error", "message", "async sends did not complete within 60 s");
            return 1;
        }
        return failed.get();
    }

    private static void produceBatch(DefaultMQProducer producer, Opts o, String topic, int count)
        throws Exception {
        int batchSize = Math.max(1, o.getInt("batch-size", 32));
        for (int start = 0; start < count; start += batchSize) {
            List<Message> batch = new ArrayList<>();
            for (int i = start; i < Math.min(count, start + batchSize); i++) {
                batch.add(buildMessage(o, topic, i));
            }
            SendResult r = producer.send(batch);
            // A batch result carries comma-joined ids, and the offset of the first message.
            String[] ids = r.getMsgId() == null ? new String[0] : r.getMsgId().split(",");
            String[] offIds = r.getOffsetMsgId() == null ? new String[0] : r.getOffsetMsgId().split(",");
            for (int j = 0; j < batch.size(); j++) {
                JSONObject rec = sentRecord(start + j, batch.get(j), r);
                rec.put("msgId", j < ids.length ? ids[j] : null);
                rec.put("offsetMsgId", j < offIds.length ? offIds[j] : null);
                rec.put("queueOffset", r.getQueueOffset() + j);
                rec.put("batch", true);
                emit(rec);
            }
        }
    }

    private static void emitSent(int index, Message m, SendResult r) {
        emit(sentRecord(index, m, r));
    }

    private static JSONObject sentRecord(int index, Message m, SendResult r) {
        JSONObject rec = new JSONObject(true);
        rec.put("index", index);
        if (r != null) {
            rec.put("msgId", r.getMsgId());
            rec.put("offsetMsgId", r.getOffsetMsgId());
            rec.put("queue", queue(r.getMessageQueue()));
            rec.put("queueOffset", r.getQueueOffset());
            rec.put("status", String.valueOf(r.getSendStatus()));
            if (r instanceof TransactionSendResult) {
                rec.put("transactionId", r.getTransactionId());
                rec.put("localTransactionState",
                    String.valueOf(((TransactionSendResult) r).getLocalTransactionState()));
            }
        } else {
            // oneway: no response, but the client still stamped the message with its unique id
            rec.put("msgId", m.getProperty(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX));
            rec.put("offsetMsgId", null);
            rec.put("queue", null);
            rec.put("queueOffset", null);
            rec.put("status", "ONEWAY");
        }
        rec.put("topic", m.getTopic());
        rec.put("bodySha256", sha256(m.getBody()));
        rec.put("bodySize", m.getBody() == null ? 0 : m.getBody().length);
        rec.put("tags", m.getTags());
        rec.put("keys", m.getKeys());
        rec.put("properties", new TreeMap<>(m.getProperties()));
        return rec;
    }

    // ------------------------------------------------------------------ consume

    private static int consume(Opts o) throws Exception {
        String namesrv = o.req("namesrv");
        String topic = o.req("topic");
        int count = o.getInt("count", 1);
        String mode = o.get("mode", "push");
        String model = o.get("model", "cluster");
        String group = o.get("group", "rmqwire_peer_consumer_" + ProcessHandle.current().pid());
        String sub = o.get("sub", "*");
        long timeoutMs = o.getInt("timeout-ms", 60000);
        // MessageModel moved package between 4.x and 5.x: named by its constant, so this file
        // compiles against both clients.
        String mm;
        if (model.equals("cluster")) {
            mm = "CLUSTERING";
        } else if (model.equals("broadcast")) {
            mm = "BROADCASTING";
        } else {
            throw new IllegalArgumentException("--model must be cluster|broadcast");
        }
        ConsumeFromWhere where;
        String from = o.get("from", "first");
        if (from.equals("first")) {
            where = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET;
        } else if (from.equals("last")) {
            where = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET;
        } else {
            throw new IllegalArgumentException("--from must be first|last");
        }
        switch (mode) {
            case "push":
                return consumePush(o, namesrv, topic, count, group, sub, mm, where, timeoutMs);
            case "litepull":
                return consumeLitePull(namesrv, topic, count, group, sub, mm, where, timeoutMs);
            default:
                throw new IllegalArgumentException("unknown consume mode " + mode);
        }
    }

    /** The 5.x timer setters, called by name: the 4.x Message has none (timer mode is 5.x only). */
    private static void setLong(Message m, String setter, long value) throws Exception {
        Message.class.getMethod(setter, long.class).invoke(m, value);
    }

    private static int consumePush(Opts o, String namesrv, String topic, int count, String group, String sub,
        String mm, ConsumeFromWhere where, long timeoutMs) throws Exception {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group, aclHook(o), new AllocateMessageQueueAveragely());
        c.setNamesrvAddr(namesrv);
        // a cold JVM on a loaded machine needs seconds for its first connections (default 3 s)
        c.setMqClientApiTimeout(o.getInt("api-timeout-ms", 15000));
        c.setMessageModel(Enum.valueOf(c.getMessageModel().getDeclaringClass(), mm));
        c.setConsumeFromWhere(where);
        c.subscribe(topic, sub);
        if (o.single.containsKey("max-reconsume")) {
            c.setMaxReconsumeTimes(o.getInt("max-reconsume", 16));
        }
        // --fail-times R: ask for redelivery of each message R times (tests retry topics and reconsumeTimes)
        final int failTimes = o.getInt("fail-times", 0);
        final CountDownLatch latch = new CountDownLatch(count);
        if (o.orderly) {
            c.registerMessageListener((MessageListenerOrderly) (msgs, ctx) -> {
                for (MessageExt m : msgs) {
                    emitReceived(m);
                    if (m.getReconsumeTimes() < failTimes) {
                        return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT;
                    }
                    latch.countDown();
                }
                return ConsumeOrderlyStatus.SUCCESS;
            });
        } else {
            c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                for (MessageExt m : msgs) {
                    emitReceived(m);
                    if (m.getReconsumeTimes() < failTimes) {
                        return ConsumeConcurrentlyStatus.RECONSUME_LATER;
                    }
                    latch.countDown();
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
        }
        long t0 = System.nanoTime();
        c.start();
        emitEvent("started", "startMs", (System.nanoTime() - t0) / 1_000_000, "group", group);
        boolean ok = latch.await(timeoutMs, TimeUnit.MILLISECONDS);
        c.shutdown();
        emitEvent(ok ? "done" : "timeout", "elapsedMs", (System.nanoTime() - t0) / 1_000_000,
            "received", count - latch.getCount());
        return ok ? 0 : 3;
    }

    private static int consumeLitePull(String namesrv, String topic, int count, String group, String sub,
        String mm, ConsumeFromWhere where, long timeoutMs) throws Exception {
        DefaultLitePullConsumer c = new DefaultLitePullConsumer(group);
        c.setNamesrvAddr(namesrv);
        c.setMessageModel(Enum.valueOf(c.getMessageModel().getDeclaringClass(), mm));
        c.setConsumeFromWhere(where);
        c.subscribe(topic, sub);
        long t0 = System.nanoTime();
        c.start();
        emitEvent("started", "startMs", (System.nanoTime() - t0) / 1_000_000, "group", group);
        long deadline = System.currentTimeMillis() + timeoutMs;
        int received = 0;
        while (received < count && System.currentTimeMillis() < deadline) {
            for (MessageExt m : c.poll(Math.max(1, Math.min(1000, deadline - System.currentTimeMillis())))) {
                emitReceived(m);
                received++;
            }
        }
        c.commitSync();
        c.shutdown();
        boolean ok = received >= count;
        emitEvent(ok ? "done" : "timeout", "elapsedMs", (System.nanoTime() - t0) / 1_000_000,
            "received", received);
        return ok ? 0 : 3;
    }

    private static void emitReceived(MessageExt m) {
        JSONObject rec = new JSONObject(true);
        rec.put("msgId", m.getMsgId());
        rec.put("offsetMsgId", m instanceof MessageClientExt ? ((MessageClientExt) m).getOffsetMsgId() : null);
        rec.put("topic", m.getTopic());
        JSONObject q = new JSONObject(true);
        q.put("topic", m.getTopic());
        q.put("brokerName", m.getBrokerName());
        q.put("queueId", m.getQueueId());
        rec.put("queue", q);
        rec.put("queueOffset", m.getQueueOffset());
        rec.put("commitLogOffset", m.getCommitLogOffset());
        byte[] body = m.getBody() == null ? new byte[0] : m.getBody();
        rec.put("bodySha256", sha256(body));
        rec.put("bodySize", body.length);
        String text = utf8OrNull(body);
        rec.put("bodyEncoding", text != null ? "utf8" : "base64");
        rec.put("body", text != null ? text : Base64.getEncoder().encodeToString(body));
        rec.put("tags", m.getTags());
        rec.put("keys", m.getKeys());
        rec.put("properties", new TreeMap<>(m.getProperties()));
        rec.put("reconsumeTimes", m.getReconsumeTimes());
        rec.put("bornHost", host(m.getBornHost()));
        rec.put("storeHost", host(m.getStoreHost()));
        rec.put("bornTimestamp", m.getBornTimestamp());
        rec.put("storeTimestamp", m.getStoreTimestamp());
        rec.put("sysFlag", m.getSysFlag());
        rec.put("flag", m.getFlag());
        rec.put("bodyCRC", m.getBodyCRC());
        rec.put("storeSize", m.getStoreSize());
        emit(rec);
    }

    // ------------------------------------------------------------------ output helpers

    private static JSONObject queue(MessageQueue mq) {
        if (mq == null) {
            return null;
        }
        JSONObject q = new JSONObject(true);
        q.put("topic", mq.getTopic());
        q.put("brokerName", mq.getBrokerName());
        q.put("queueId", mq.getQueueId());
        return q;
    }

    private static String host(SocketAddress a) {
        if (a instanceof InetSocketAddress) {
            InetSocketAddress i = (InetSocketAddress) a;
            return i.getAddress().getHostAddress() + ":" + i.getPort();
        }
        return a == null ? null : a.toString();
    }

    /** The body as text if it is valid UTF-8 without control characters (other than tab/newline). */
    static String utf8OrNull(byte[] b) {
        try {
            String s = StandardCharsets.UTF_8.newDecoder()
                .onMalformedInput(CodingErrorAction.REPORT)
                .onUnmappableCharacter(CodingErrorAction.REPORT)
                .decode(java.nio.ByteBuffer.wrap(b)).toString();
            for (int i = 0; i < s.length(); i++) {
                char ch = s.charAt(i);
                if (ch < 0x20 && ch != '\n' && ch != '\t' && ch != '\r') {
                    return null;
                }
            }
            return s;
        } catch (CharacterCodingException e) {
            return null;
        }
    }

    static String sha256(byte[] b) {
        try {
            MessageDigest d = MessageDigest.getInstance("SHA-256");
            byte[] h = d.digest(b == null ? new byte[0] : b);
            StringBuilder sb = new StringBuilder();
            for (byte x : h) {
                sb.append(String.format("%02x", x));
            }
            return sb.toString();
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    private static void emitEvent(String event, Object... kv) {
        JSONObject rec = new JSONObject(true);
        rec.put("event", event);
        for (int i = 0; i + 1 < kv.length; i += 2) {
            rec.put(String.valueOf(kv[i]), kv[i + 1]);
        }
        emit(rec);
    }

    private static void emit(JSONObject rec) {
        // Nulls are kept so every record has the same keys.
        String line = JSON.toJSONString(rec, SerializerFeature.WriteMapNullValue);
        synchronized (Peer.class) {
            out.println(line);
            out.flush();
        }
    }
}
