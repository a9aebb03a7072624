import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.RequestCallback;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * rmqwire's consumer-side helpers around the official Java client, one JSON object per line:
 *
 *   request --namesrv A --topic T --count N [--timeout-ms 10000] [--group G]
 *                     DefaultMQProducer.request for N messages; prints each reply
 *   drain   --namesrv A --topic T --group G --count N --mode push|litepull [--timeout-ms M]
 *                     consume a backlog from the first offset; prints msg/s and the process's
 *                     CPU time (the consumer benchmark's Java side)
 */
public class ConsumerTool {

    public static void main(String[] args) throws Exception {
        Map<String, String> o = new HashMap<>();
        for (int i = 1; i + 1 < args.length; i += 2) {
            o.put(args[i].replaceFirst("^--", ""), args[i + 1]);
        }
        int rc;
        switch (args[0]) {
            case "request":
                rc = request(o);
                break;
            case "drain":
                rc = drain(o);
                break;
            default:
                throw new IllegalArgumentException("unknown command " + args[0]);
        }
        System.exit(rc);
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
        return s == null ? "null" : "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    private static long cpuMillis() {
        java.lang.management.OperatingSystemMXBean os = ManagementFactory.getOperatingSystemMXBean();
        if (os instanceof com.sun.management.OperatingSystemMXBean) {
            return ((com.sun.management.OperatingSystemMXBean) os).getProcessCpuTime() / 1_000_000;
        }
        return -1;
    }

    private static int request(Map<String, String> o) throws Exception {
        DefaultMQProducer p = new DefaultMQProducer(o.getOrDefault("group", "rmqwire_request_" + ProcessHandle.current().pid()));
        p.setNamesrvAddr(req(o, "namesrv"));
        p.setMqClientApiTimeout(15000); // a cold JVM on a loaded machine needs seconds for its first connections (default 3 s)
        p.start();
        emit("{\"event\":\"started\"}");
        int failed = 0;
        try {
            for (int i = 0; i < num(o, "count", 1); i++) {
                Message m = new Message(req(o, "topic"), ("request-" + i).getBytes(StandardCharsets.UTF_8));
                // The callback form: 5.3.3's blocking request(msg, timeout) releases its wait as
                // soon as the send is acknowledged, so it reports a timeout before any reply.
                final int index = i;
                final CountDownLatch done = new CountDownLatch(1);
                final AtomicLong ok = new AtomicLong();
                try {
                    p.request(m, new RequestCallback() {
                        @Override
                        public void onSuccess(Message reply) {
                            // The client calls onSuccess from the send's acknowledgment too: with
                            // null when the reply is still to come, and a second time with the
                            // reply when the reply overtook the acknowledgment. One reply per request.
                            if (reply == null || !ok.compareAndSet(0, 1)) {
                                return;
                            }
                            emit("{\"index\":" + index + ",\"reply\":"
                                + q(new String(reply.getBody(), StandardCharsets.UTF_8))
                                + ",\"topic\":" + q(reply.getTopic()) + "}");
                            done.countDown();
                        }

                        @Override
                        public void onException(Throwable e) {
                            emit("{\"event\":\"error\",\"index\":" + index + ",\"message\":" + q(String.valueOf(e)) + "}");
                            done.countDown();
                        }
                    }, num(o, "timeout-ms", 10000));
                    done.await(num(o, "timeout-ms", 10000) + 5000L, TimeUnit.MILLISECONDS);
                } catch (Exception e) {
                    emit("{\"event\":\"error\",\"index\":" + i + ",\"message\":" + q(String.valueOf(e)) + "}");
                }
                if (ok.get() == 0) {
                    failed++;
                }
            }
        } finally {
            p.shutdown();
        }
        return failed == 0 ? 0 : 2;
    }

    private static int drain(Map<String, String> o) throws Exception {
        String namesrv = req(o, "namesrv");
        String topic = req(o, "topic");
        String group = req(o, "group");
        int count = num(o, "count", 1);
        long timeoutMs = num(o, "timeout-ms", 600000);
        String mode = o.getOrDefault("mode", "push");
        long cpu0 = cpuMillis();
        long t0 = System.nanoTime();
        AtomicLong first = new AtomicLong();
        long received;
        if (mode.equals("push")) {
            CountDownLatch latch = new CountDownLatch(count);
            DefaultMQPushConsumer c = new DefaultMQPushConsumer(group);
            c.setNamesrvAddr(namesrv);
            c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
            c.subscribe(topic, "*");
            c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                first.compareAndSet(0, System.nanoTime());
                for (MessageExt m : msgs) {
                    latch.countDown();
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            c.start();
            emit("{\"event\":\"started\"}");
            latch.await(timeoutMs, TimeUnit.MILLISECONDS);
            received = count - latch.getCount();
            long t1 = System.nanoTime();
            long cpu1 = cpuMillis();
            c.shutdown();
            return report(received, count, t0, t1, first.get(), cpu0, cpu1);
        }
        DefaultLitePullConsumer c = new DefaultLitePullConsumer(group);
        c.setNamesrvAddr(namesrv);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe(topic, "*");
        c.start();
        emit("{\"event\":\"started\"}");
        long deadline = System.currentTimeMillis() + timeoutMs;
        received = 0;
        while (received < count && System.currentTimeMillis() < deadline) {
            List<MessageExt> msgs = c.poll(1000);
            if (!msgs.isEmpty()) {
                first.compareAndSet(0, System.nanoTime());
            }
            received += msgs.size();
        }
        long t1 = System.nanoTime();
        long cpu1 = cpuMillis();
        c.shutdown();
        return report(received, count, t0, t1, first.get(), cpu0, cpu1);
    }

    private static int report(long received, int count, long t0, long t1, long first, long cpu0, long cpu1) {
        double seconds = (t1 - t0) / 1e9;
        double fromFirst = first == 0 ? seconds : (t1 - first) / 1e9;
        emit("{\"event\":\"" + (received >= count ? "done" : "timeout") + "\",\"received\":" + received
            + ",\"seconds\":" + seconds + ",\"secondsFromFirst\":" + fromFirst
            + ",\"msgsPerSec\":" + (received / seconds) + ",\"cpuSeconds\":" + ((cpu1 - cpu0) / 1000.0) + "}");
        return received >= count ? 0 : 3;
    }
}
