import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

import org.apache.rocketmq.common.MQVersion;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.UtilAll;
import org.apache.rocketmq.remoting.netty.NettyClientConfig;
import org.apache.rocketmq.remoting.netty.NettyRemotingClient;
import org.apache.rocketmq.remoting.protocol.DataVersion;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.remoting.protocol.RequestCode;
import org.apache.rocketmq.remoting.protocol.ResponseCode;
import org.apache.rocketmq.remoting.protocol.body.RegisterBrokerBody;
import org.apache.rocketmq.remoting.protocol.body.TopicConfigAndMappingSerializeWrapper;
import org.apache.rocketmq.remoting.protocol.header.namesrv.GetRouteInfoRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.namesrv.RegisterBrokerRequestHeader;

/**
 * Load generator of tools/bench/namesrv, built on the official client remoting classes.
 *
 * route ADDR CONNS INFLIGHT WARMUP_S MEASURE_S TOPICS BROKERS: registers BROKERS brokers (each on
 * its own connection, kept open) with TOPICS topics, then GET_ROUTEINFO_BY_TOPIC for random
 * topics from CONNS connections with INFLIGHT synchronous callers each.
 *
 * register ADDR CONNS INFLIGHT WARMUP_S MEASURE_S TOPICS: REGISTER_BROKER with TOPICS topics per
 * broker, each caller its own broker, a new DataVersion every time (the full update path).
 *
 * reregister ...: the same, but each broker sends the same body again (the periodic
 * re-registration of a broker whose topics did not change).
 *
 * Prints one JSON line: {"mode":...,"requests":N (in the window),"total":T (all answered),
 * "seconds":S,"errors":E}.
 */
public class NamesrvBench {
    static final String CLUSTER = "BenchCluster";

    public static void main(String[] args) throws Exception {
        System.setProperty(RemotingCommand.REMOTING_VERSION_KEY, Integer.toString(MQVersion.CURRENT_VERSION));
        String mode = args[0];
        String addr = args[1];
        int conns = Integer.parseInt(args[2]);
        int inflight = Integer.parseInt(args[3]);
        double warmup = Double.parseDouble(args[4]);
        double measure = Double.parseDouble(args[5]);
        int topics = Integer.parseInt(args[6]);
        int brokers = args.length > 7 ? Integer.parseInt(args[7]) : 0;

        List<NettyRemotingClient> clients = new ArrayList<>();
        List<NettyRemotingClient> brokerClients = new ArrayList<>();
        try {
            for (int b = 0; b < brokers; b++) {
                NettyRemotingClient bc = newClient();
                brokerClients.add(bc);
                RemotingCommand resp = bc.invokeSync(addr, registerRequest(b, registerBody(topics, 1)), 30000);
                check(resp, "register broker " + b);
            }
            for (int c = 0; c < conns; c++) {
                clients.add(newClient());
            }
            // Bodies are built before the clock starts, so the generator measures the server: a
            // cycle of distinct DataVersions per broker ("register"), or one body ("reregister").
            int variants = mode.equals("register") ? 16 : 1;
            byte[][][] bodies = new byte[conns * inflight][][];
            if (!mode.equals("route")) {
                for (int caller = 0; caller < bodies.length; caller++) {
                    bodies[caller] = new byte[variants][];
                    for (int v = 0; v < variants; v++) {
                        bodies[caller][v] = registerBody(topics, v + 1);
                    }
                }
            }
            LongAdder done = new LongAdder();
            LongAdder total = new LongAdder();
            LongAdder errors = new LongAdder();
            long start = System.nanoTime();
            long measureFrom = start + (long) (warmup * 1e9);
            long end = measureFrom + (long) (measure * 1e9);
            ConcurrentHashMap<String, String> firstError = new ConcurrentHashMap<>();
            List<Thread> threads = new ArrayList<>();
            for (int c = 0; c < conns; c++) {
                for (int k = 0; k < inflight; k++) {
                    final NettyRemotingClient client = clients.get(c);
                    final int caller = c * inflight + k;
                    Thread t = new Thread(() -> {
                        ThreadLocalRandom rnd = ThreadLocalRandom.current();
                        int sent = 0;
                        while (true) {
                            long now = System.nanoTime();
                            if (now >= end) {
                                return;
                            }
                            try {
                                RemotingCommand req = mode.equals("route")
                                    ? routeRequest("BenchTopic_" + rnd.nextInt(topics))
                                    : registerRequest(1000 + caller,
                                        bodies[caller][sent++ % bodies[caller].length]);
                                RemotingCommand resp = client.invokeSync(addr, req, 10000);
                                long after = System.nanoTime();
                                if (resp.getCode() != ResponseCode.SUCCESS) {
                                    errors.increment();
                                    firstError.putIfAbsent("e", resp.getCode() + " " + resp.getRemark());
                                } else {
                                    total.increment();
                                    if (now >= measureFrom && after <= end) {
                                        done.increment();
                                    }
                                }
                            } catch (Exception e) {
                                errors.increment();
                                firstError.putIfAbsent("e", e.toString());
                            }
                        }
                    });
                    t.setDaemon(true);
                    threads.add(t);
                    t.start();
                }
            }
            for (Thread t : threads) {
                t.join();
            }
            System.out.printf("{\"mode\":\"%s\",\"requests\":%d,\"total\":%d,\"seconds\":%.3f,\"errors\":%d,\"firstError\":\"%s\"}%n",
                mode, done.sum(), total.sum(), measure, errors.sum(),
                firstError.getOrDefault("e", "").replace("\\", "/").replace("\"", "'").replace("\n", " "));
        } finally {
            for (NettyRemotingClient c : clients) {
                c.shutdown();
            }
            for (NettyRemotingClient c : brokerClients) {
                c.shutdown();
            }
        }
    }

    static NettyRemotingClient newClient() {
        NettyRemotingClient client = new NettyRemotingClient(new NettyClientConfig());
        client.start();
        return client;
    }

    static void check(RemotingCommand resp, String what) {
        if (resp.getCode() != ResponseCode.SUCCESS) {
            throw new IllegalStateException(what + ": " + resp.getCode() + " " + resp.getRemark());
        }
    }

    static RemotingCommand routeRequest(String topic) {
        GetRouteInfoRequestHeader header = new GetRouteInfoRequestHeader();
        header.setTopic(topic);
        return RemotingCommand.createRequestCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, header);
    }

    static byte[] registerBody(int topics, long counter) {
        TopicConfigAndMappingSerializeWrapper wrapper = new TopicConfigAndMappingSerializeWrapper();
        for (int i = 0; i < topics; i++) {
            String name = "BenchTopic_" + i;
            wrapper.getTopicConfigTable().put(name, new TopicConfig(name, 8, 8, 6));
        }
        DataVersion dv = new DataVersion();
        dv.setTimestamp(1_700_000_000_000L);
        dv.setCounter(new AtomicLong(counter));
        wrapper.setDataVersion(dv);
        RegisterBrokerBody body = new RegisterBrokerBody();
        body.setTopicConfigSerializeWrapper(wrapper);
        return body.encode(false);
    }

    static RemotingCommand registerRequest(int broker, byte[] bytes) {
        RegisterBrokerRequestHeader header = new RegisterBrokerRequestHeader();
        header.setBrokerName("bench-broker-" + broker);
        header.setBrokerAddr("127.0.0.1:" + (20000 + broker));
        header.setClusterName(CLUSTER);
        header.setHaServerAddr("127.0.0.1:" + (30000 + broker));
        header.setBrokerId(0L);
        header.setEnableActingMaster(false);
        header.setCompressed(false);
        header.setBodyCrc32(UtilAll.crc32(bytes));
        RemotingCommand request = RemotingCommand.createRequestCommand(RequestCode.REGISTER_BROKER, header);
        request.setBody(bytes);
        return request;
    }
}
