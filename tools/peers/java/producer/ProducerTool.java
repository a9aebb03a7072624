import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.client.utils.MessageUtil;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * rmqwire's producer-side helpers around the official Java client, one JSON object per line:
 *
 *   hold  --namesrv A --group G --topic T [--hold-ms 120000]
 *                                                  a producer that stays registered (until killed)
 *   reply --namesrv A --group G --topic T --count N --timeout-ms M
 *                                                  a consumer answering request messages with
 *                                                  MessageUtil.createReplyMessage
 *   transact --namesrv A --group G --topic T --states commit,rollback,unknown [--check-answer commit]
 *            [--checks N] [--timeout-ms M] [--immunity-s S]
 *                                                  a TransactionMQProducer: one half message per state
 *                                                  (body "tx-<i>-<state>"), each local transaction
 *                                                  returning its state; the broker's check-backs are
 *                                                  answered with --check-answer and reported; it
 *                                                  stays until N checks came (or M ms passed)
 *   bench --namesrv A --topic T --mode sync|async|batch|oneway --threads N --seconds S
 *         [--body-size 1024] [--batch 16] [--inflight 1024]
 *                                                  a load generator printing TPS and latencies
 */
public class ProducerTool {

    public static void main(String[] args) throws Exception {
        Map<String, String> o = new HashMap<>();
        for (int i = 1; i + 1 < args.length; i += 2) {
            o.put(args[i].replaceFirst("^--", ""), args[i + 1]);
        }
        try {
            switch (args[0]) {
                case "hold":
                    hold(o);
                    break;
                case "reply":
                    reply(o);
                    break;
                case "transact":
                    transact(o);
                    break;
                case "bench":
                    bench(o);
                    break;
                default:
                    throw new IllegalArgumentException("unknown command " + args[0]);
            }
        } catch (Throwable e) {
            // the client's non-daemon threads would keep a JVM whose main thread died alive
            Throwable cause = e.getCause();
            emit("{\"event\":\"error\",\"message\":" + q(String.valueOf(e)
                + (cause != null ? " caused by " + cause : "")) + "}");
            System.exit(1);
        }
        System.exit(0);
    }

    private static String req(Map<String, String> o, String k) {
        String v = o.get(k);
        if (v == null) {
            throw new IllegalArgumentException("--" + k + " is required");
        }
        return v;
    }

    private static int num(Map<String, String> o, String k, int dflt) {
        return o.containsKey(k) ? Integer.parseInt(o.get(k)) : dflt;
    }

    private static synchronized void emit(String json) {
        System.out.println(json);
        System.out.flush();
    }

    private static String q(String s) {
        return s == null ? "null" : "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"")
            .replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t") + "\"";
    }

    private static void hold(Map<String, String> o) throws Exception {
        DefaultMQProducer p = new DefaultMQProducer(req(o, "group"));
        p.setNamesrvAddr(req(o, "namesrv"));
        p.setMqClientApiTimeout(15000); // its first route lookup timed out at 3 s (the default) at load 20
        p.setSendMsgTimeout(15000);
        p.start();
        SendResult r = p.send(new Message(req(o, "topic"), "hold".getBytes(StandardCharsets.UTF_8)));
        emit("{\"event\":\"started\",\"clientId\":" + q(p.buildMQClientId()) + ",\"status\":"
            + q(String.valueOf(r.getSendStatus())) + "}");
        Thread.sleep(num(o, "hold-ms", 120000)); // the parent stops us (SIGTERM) once it has looked
        p.shutdown();
        emit("{\"event\":\"done\"}");
    }

    private static void reply(Map<String, String> o) throws Exception {
        String namesrv = req(o, "namesrv");
        int count = num(o, "count", 1);
        DefaultMQProducer replier = new DefaultMQProducer(req(o, "group") + "_replier");
        replier.setNamesrvAddr(namesrv);
        replier.setMqClientApiTimeout(15000); // a cold JVM on a loaded machine needs seconds for its first connections (default 3 s)
        replier.start();
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(req(o, "group"));
        c.setNamesrvAddr(namesrv);
        c.setMqClientApiTimeout(15000);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET);
        c.subscribe(req(o, "topic"), "*");
        CountDownLatch done = new CountDownLatch(count);
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                try {
                    byte[] body = ("reply:" + new String(m.getBody(), StandardCharsets.UTF_8))
                        .getBytes(StandardCharsets.UTF_8);
                    Message reply = MessageUtil.createReplyMessage(m, body);
                    SendResult r = replier.send(reply, 3000);
                    emit("{\"event\":\"replied\",\"correlationId\":" + q(m.getProperty("CORRELATION_ID"))
                        + ",\"replyTo\":" + q(m.getProperty("REPLY_TO_CLIENT")) + ",\"ttl\":"
                        + q(m.getProperty("TTL")) + ",\"status\":" + q(String.valueOf(r.getSendStatus())) + "}");
                    done.countDown();
                } catch (Exception e) {
                    emit("{\"event\":\"error\",\"message\":" + q(String.valueOf(e)) + "}");
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        emit("{\"event\":\"started\"}");
        boolean ok = done.await(num(o, "timeout-ms", 60000), TimeUnit.MILLISECONDS);
        c.shutdown();
        replier.shutdown();
        emit("{\"event\":\"" + (ok ? "done" : "timeout") + "\"}");
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
                throw new IllegalArgumentException("a transaction state is commit|rollback|unknown, not " + s);
        }
    }

    private static void transact(Map<String, String> o) throws Exception {
        String topic = req(o, "topic");
        String[] states = req(o, "states").split(",");
        final LocalTransactionState answer = txState(o.getOrDefault("check-answer", "commit"));
        int checks = num(o, "checks", 0);
        final CountDownLatch checked = new CountDownLatch(checks);
        TransactionMQProducer p = new TransactionMQProducer(req(o, "group"));
        p.setNamesrvAddr(req(o, "namesrv"));
        // loaded CI machines: a cold JVM takes seconds for its first connection
        p.setSendMsgTimeout(num(o, "send-timeout-ms", 15000));
        p.setMqClientApiTimeout(15000);
        p.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                return txState((String) arg);
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                emit("{\"event\":\"check\",\"body\":" + q(new String(msg.getBody(), StandardCharsets.UTF_8))
                    + ",\"msgId\":" + q(msg.getMsgId()) + ",\"transactionId\":" + q(msg.getTransactionId())
                    + ",\"topic\":" + q(msg.getTopic()) + ",\"queueId\":" + msg.getQueueId()
                    + ",\"checkTimes\":" + q(msg.getProperty("TRANSACTION_CHECK_TIMES"))
                    + ",\"answer\":" + q(String.valueOf(answer)) + "}");
                checked.countDown();
                return answer;
            }
        });
        p.start();
        emit("{\"event\":\"started\",\"clientId\":" + q(p.buildMQClientId()) + "}");
        for (int i = 0; i < states.length; i++) {
            Message m = new Message(topic, "TagTx", ("tx-" + i + "-" + states[i]).getBytes(StandardCharsets.UTF_8));
            m.setKeys("txkey-" + i);
            if (o.containsKey("immunity-s")) {
                m.putUserProperty("CHECK_IMMUNITY_TIME_IN_SECONDS", o.get("immunity-s"));
            }
            TransactionSendResult r = p.sendMessageInTransaction(m, states[i]);
            emit("{\"index\":" + i + ",\"state\":" + q(states[i]) + ",\"status\":" + q(String.valueOf(r.getSendStatus()))
                + ",\"localState\":" + q(String.valueOf(r.getLocalTransactionState())) + ",\"msgId\":" + q(r.getMsgId())
                + ",\"offsetMsgId\":" + q(r.getOffsetMsgId()) + ",\"transactionId\":" + q(r.getTransactionId())
                + ",\"queueOffset\":" + r.getQueueOffset() + "}");
        }
        boolean ok = checked.await(num(o, "timeout-ms", 60000), TimeUnit.MILLISECONDS);
        Thread.sleep(1000); // the answer to the last check goes out (oneway) after the listener returns
        p.shutdown();
        emit("{\"event\":\"" + (ok ? "done" : "timeout") + "\"}");
    }

    private static void bench(Map<String, String> o) throws Exception {
        String mode = req(o, "mode");
        String topic = req(o, "topic");
        int threads = num(o, "threads", 1);
        int seconds = num(o, "seconds", 10);
        int warmup = num(o, "warmup", 2);
        int bodySize = num(o, "body-size", 1024);
        int batch = num(o, "batch", 16);
        int inflight = num(o, "inflight", 1024);
        DefaultMQProducer p = new DefaultMQProducer("rmqwire_bench_java_" + mode);
        p.setNamesrvAddr(req(o, "namesrv"));
        p.setCompressMsgBodyOverHowmuch(Integer.MAX_VALUE);
        p.setInstanceName("bench_" + mode + "_" + ProcessHandle.current().pid());
        p.start();
        byte[] body = new byte[bodySize];
        Arrays.fill(body, (byte) 'x');
        for (int attempt = 0; ; attempt++) { // route and connection ready before timing
            try {
                p.send(new Message(topic, body));
                break;
            } catch (Exception e) {
                if (attempt >= 4) {
                    throw e;
                }
            }
        }
        final long[] lat = new long[1 << 22];
        final AtomicInteger nlat = new AtomicInteger();
        final AtomicLong sent = new AtomicLong();
        final AtomicLong failed = new AtomicLong();
        final long warmEnd = System.nanoTime() + warmup * 1_000_000_000L;
        final long end = warmEnd + seconds * 1_000_000_000L;
        List<Thread> workers = new ArrayList<>();
        final Semaphore slots = new Semaphore(inflight);
        final long[] cpu = new long[2];
        Thread cpuClock = new Thread(() -> {
            try {
                Thread.sleep(Math.max(0, (warmEnd - System.nanoTime()) / 1_000_000));
                cpu[0] = processCpuNanos();
                Thread.sleep(Math.max(0, (end - System.nanoTime()) / 1_000_000));
                cpu[1] = processCpuNanos();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        cpuClock.start();
        for (int t = 0; t < threads; t++) {
            Thread w = new Thread(() -> {
                try {
                    while (true) {
                        long t0 = System.nanoTime();
                        if (t0 >= end) {
                            break;
                        }
                        boolean counted = t0 >= warmEnd;
                        switch (mode) {
                            case "sync": {
                                p.send(new Message(topic, body));
                                record(lat, nlat, System.nanoTime() - t0, counted);
                                if (counted) {
                                    sent.incrementAndGet();
                                }
                                break;
                            }
                            case "batch": {
                                List<Message> ms = new ArrayList<>(batch);
                                for (int i = 0; i < batch; i++) {
                                    ms.add(new Message(topic, body));
                                }
                                p.send(ms);
                                record(lat, nlat, System.nanoTime() - t0, counted);
                                if (counted) {
                                    sent.addAndGet(batch);
                                }
                                break;
                            }
                            case "oneway": {
                                p.sendOneway(new Message(topic, body));
                                if (counted) {
                                    sent.incrementAndGet();
                                }
                                break;
                            }
                            case "async": {
                                slots.acquire();
                                final long s0 = System.nanoTime();
                                p.send(new Message(topic, body), new SendCallback() {
                                    @Override
                                    public void onSuccess(SendResult r) {
                                        long now = System.nanoTime();
                                        slots.release();
                                        if (s0 >= warmEnd && now <= end) {
                                            record(lat, nlat, now - s0, true);
                                            sent.incrementAndGet();
                                        }
                                    }

                                    @Override
                                    public void onException(Throwable e) {
                                        slots.release();
                                        failed.incrementAndGet();
                                    }
                                });
                                break;
                            }
                            default:
                                throw new IllegalArgumentException("mode " + mode);
                        }
                    }
                } catch (Exception e) {
                    failed.incrementAndGet();
                    emit("{\"event\":\"error\",\"message\":" + q(String.valueOf(e)) + "}");
                }
            });
            workers.add(w);
            w.start();
        }
        for (Thread w : workers) {
            w.join();
        }
        slots.acquire(inflight); // wait for async sends still in flight
        cpuClock.join();
        int n = Math.min(nlat.get(), lat.length);
        long[] l = Arrays.copyOf(lat, n);
        Arrays.sort(l);
        double mean = 0;
        for (long x : l) {
            mean += x;
        }
        mean = n == 0 ? 0 : mean / n / 1e6;
        double p99 = n == 0 ? 0 : l[Math.min(n - 1, (int) Math.ceil(n * 0.99) - 1)] / 1e6;
        emit("{\"mode\":" + q(mode) + ",\"threads\":" + threads + ",\"messages\":" + sent.get()
            + ",\"seconds\":" + seconds + ",\"tps\":" + (sent.get() / (double) seconds) + ",\"meanMs\":" + mean
            + ",\"p99Ms\":" + p99 + ",\"failed\":" + failed.get() + ",\"cpuUsPerMsg\":"
            + (sent.get() == 0 ? 0 : (cpu[1] - cpu[0]) / 1000.0 / sent.get()) + "}");
        // no p.shutdown(): after a oneway flood it waits on the broker for minutes; main exits
    }

    private static long processCpuNanos() {
        java.lang.management.OperatingSystemMXBean os = java.lang.management.ManagementFactory.getOperatingSystemMXBean();
        if (os instanceof com.sun.management.OperatingSystemMXBean) {
            return ((com.sun.management.OperatingSystemMXBean) os).getProcessCpuTime();
        }
        return 0;
    }

    private static void record(long[] lat, AtomicInteger n, long nanos, boolean counted) {
        if (!counted) {
            return;
        }
        int i = n.getAndIncrement();
        if (i < lat.length) {
            lat[i] = nanos;
        }
    }
}
