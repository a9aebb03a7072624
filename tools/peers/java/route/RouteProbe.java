import java.util.List;

import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * rmqwire's probe: asks a NameServer for a topic's route through the official Java client
 * (DefaultMQProducer.fetchPublishMessageQueues, i.e. GET_ROUTEINFO_BY_TOPIC) and prints one
 * line per queue, "QUEUE brokerName queueId", or "ERROR responseCode message".
 * Usage: RouteProbe namesrvAddr topic [topic ...]
 */
public final class RouteProbe {
    private static final int ATTEMPTS = 4;

    private RouteProbe() {
    }

    public static void main(String[] args) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer("rmqwire_route_probe");
        producer.setNamesrvAddr(args[0]);
        producer.start();
        int rc = 0;
        try {
            for (int i = 1; i < args.length; i++) {
                String topic = args[i];
                // The client's 3 s route timeout is missed on a busy machine (a cold JVM), and
                // the exception is then the same as for a topic without a route: ask again.
                for (int attempt = 1; ; attempt++) {
                    try {
                        List<MessageQueue> queues = producer.fetchPublishMessageQueues(topic);
                        for (MessageQueue mq : queues) {
                            System.out.println("QUEUE " + topic + " " + mq.getBrokerName() + " " + mq.getQueueId());
                        }
                        break;
                    } catch (MQClientException e) {
                        if (attempt < ATTEMPTS) {
                            Thread.sleep(500);
                            continue;
                        }
                        System.out.println("ERROR " + topic + " " + e.getResponseCode() + " " + e.getErrorMessage());
                        break;
                    }
                }
            }
        } catch (Throwable t) {
            t.printStackTrace(System.err);
            rc = 2;
        } finally {
            producer.shutdown();
        }
        System.out.flush();
        Runtime.getRuntime().halt(rc);
    }
}
