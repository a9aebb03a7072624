// Golden wire vectors produced by the official Apache RocketMQ classes.
//
// Our own harness (not upstream code): it builds frames, JSON bodies, stored message records,
// batch bodies, message ids, compression outputs and ACL signatures with the public RocketMQ
// 5.3.3 classes and writes them, with the semantic inputs needed to rebuild each one in Python,
// to one JSON file. tests/conformance/test_golden_vectors.py compiles and runs it, then compares
// rmqwire byte-for-byte (encoding) and field-for-field (decoding).
//
// Usage: java -Duser.timezone=UTC -cp <classes>:<lib>/* GoldenVectors <out.json>

import com.alibaba.fastjson.JSON;
import com.alibaba.fastjson.JSONArray;
import com.alibaba.fastjson.JSONObject;
import com.alibaba.fastjson.parser.Feature;
import com.alibaba.fastjson.serializer.SerializerFeature;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import java.io.ByteArrayOutputStream;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.AclUtils;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.TopicFilterType;
import org.apache.rocketmq.common.UtilAll;
import org.apache.rocketmq.common.compression.CompressionType;
import org.apache.rocketmq.common.compression.CompressorFactory;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageAccessor;
import org.apache.rocketmq.common.message.MessageClientIDSetter;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageExtBrokerInner;
import org.apache.rocketmq.common.message.MessageId;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.message.MessageVersion;
import org.apache.rocketmq.common.sysflag.MessageSysFlag;
import org.apache.rocketmq.remoting.CommandCustomHeader;
import org.apache.rocketmq.remoting.protocol.DataVersion;
import org.apache.rocketmq.remoting.protocol.LanguageCode;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.remoting.protocol.RequestCode;
import org.apache.rocketmq.remoting.protocol.ResponseCode;
import org.apache.rocketmq.remoting.protocol.SerializeType;
import org.apache.rocketmq.remoting.protocol.admin.ConsumeStats;
import org.apache.rocketmq.remoting.protocol.admin.OffsetWrapper;
import org.apache.rocketmq.remoting.protocol.admin.TopicOffset;
import org.apache.rocketmq.remoting.protocol.admin.TopicStatsTable;
import org.apache.rocketmq.remoting.protocol.body.ClusterInfo;
import org.apache.rocketmq.remoting.protocol.body.KVTable;
import org.apache.rocketmq.remoting.protocol.body.LockBatchRequestBody;
import org.apache.rocketmq.remoting.protocol.body.LockBatchResponseBody;
import org.apache.rocketmq.remoting.protocol.body.TopicList;
import org.apache.rocketmq.remoting.protocol.header.GetConsumerListByGroupResponseBody;
import org.apache.rocketmq.remoting.protocol.body.RegisterBrokerBody;
import org.apache.rocketmq.remoting.protocol.body.TopicConfigAndMappingSerializeWrapper;
import org.apache.rocketmq.remoting.protocol.filter.FilterAPI;
import org.apache.rocketmq.remoting.protocol.header.ConsumerSendMsgBackRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.CreateTopicRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.EndTransactionRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.GetMaxOffsetRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.GetMaxOffsetResponseHeader;
import org.apache.rocketmq.remoting.protocol.header.HeartbeatRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.LockBatchMqRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.PullMessageRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.PullMessageResponseHeader;
import org.apache.rocketmq.remoting.protocol.header.QueryConsumerOffsetRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.QueryConsumerOffsetResponseHeader;
import org.apache.rocketmq.remoting.protocol.header.QueryMessageRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.SendMessageRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.SendMessageRequestHeaderV2;
import org.apache.rocketmq.remoting.protocol.header.SendMessageResponseHeader;
import org.apache.rocketmq.remoting.protocol.header.UpdateConsumerOffsetRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.ViewMessageRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.namesrv.GetRouteInfoRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.namesrv.RegisterBrokerRequestHeader;
import org.apache.rocketmq.remoting.protocol.heartbeat.ConsumeType;
import org.apache.rocketmq.remoting.protocol.heartbeat.ConsumerData;
import org.apache.rocketmq.remoting.protocol.heartbeat.HeartbeatData;
import org.apache.rocketmq.remoting.protocol.heartbeat.MessageModel;
import org.apache.rocketmq.remoting.protocol.heartbeat.ProducerData;
import org.apache.rocketmq.remoting.protocol.heartbeat.SubscriptionData;
import org.apache.rocketmq.remoting.protocol.route.BrokerData;
import org.apache.rocketmq.remoting.protocol.route.QueueData;
import org.apache.rocketmq.remoting.protocol.route.TopicRouteData;
import org.apache.rocketmq.store.MessageExtEncoder;
import org.apache.rocketmq.store.config.MessageStoreConfig;

public class GoldenVectors {
    static final int VERSION = 479; // MQVersion V5_3_3 ordinal
    static final long T0 = 1700000000000L;
    static final String TRICKY = "\u4e2d\u6587 ctl:\u0001\u001f\u007f quote:\" backslash:\\ slash:/ end";

    final JSONArray cases = new JSONArray();

    // ---- small helpers --------------------------------------------------------------------------

    static String hex(byte[] b) {
        if (b == null) {
            return null;
        }
        StringBuilder sb = new StringBuilder(b.length * 2);
        for (byte x : b) {
            sb.append(String.format("%02x", x & 0xff));
        }
        return sb.toString();
    }

    static JSONObject obj() {
        return new JSONObject(true);
    }

    static JSONArray pair(Object k, Object v) {
        JSONArray a = new JSONArray();
        a.add(k);
        a.add(v);
        return a;
    }

    static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    void add(JSONObject c) {
        for (Object o : cases) {
            if (((JSONObject) o).getString("name").equals(c.getString("name"))) {
                throw new IllegalStateException("duplicate case " + c.getString("name"));
            }
        }
        cases.add(c);
    }

    static JSONObject newCase(String name, String kind) {
        JSONObject c = obj();
        c.put("name", name);
        c.put("kind", kind);
        return c;
    }

    /** Every non-null, non-static field of a header and its superclasses, as typed JSON values. */
    static JSONObject headerFields(Object header) throws Exception {
        JSONObject out = obj();
        List<Class<?>> chain = new ArrayList<>();
        for (Class<?> c = header.getClass(); c != null && c != Object.class; c = c.getSuperclass()) {
            chain.add(0, c);
        }
        TreeMap<String, Object> sorted = new TreeMap<>();
        for (Class<?> c : chain) {
            for (Field f : c.getDeclaredFields()) {
                if (Modifier.isStatic(f.getModifiers()) || f.getName().startsWith("this")) {
                    continue;
                }
                f.setAccessible(true);
                Object v = f.get(header);
                if (v == null) {
                    continue;
                }
                if (v instanceof Enum) {
                    v = v.toString();
                }
                sorted.put(f.getName(), v);
            }
        }
        out.putAll(sorted);
        return out;
    }

    // ---- frames ---------------------------------------------------------------------------------

    static RemotingCommand request(int code, CommandCustomHeader header, int opaque) {
        RemotingCommand cmd = RemotingCommand.createRequestCommand(code, header);
        cmd.setVersion(VERSION);
        cmd.setOpaque(opaque);
        return cmd;
    }

    /** Ext entries in wire order, read back from the header bytes Java wrote. */
    static JSONArray wireExtFields(byte[] frame, SerializeType type) {
        ByteBuffer bb = ByteBuffer.wrap(frame);
        bb.getInt();
        int headerLen = bb.getInt() & 0xFFFFFF;
        byte[] header = new byte[headerLen];
        bb.get(header);
        JSONArray out = new JSONArray();
        if (type == SerializeType.JSON) {
            JSONObject h = JSON.parseObject(new String(header, StandardCharsets.UTF_8), Feature.OrderedField);
            JSONObject ext = h.getJSONObject("extFields");
            if (ext == null) {
                return null;
            }
            for (Map.Entry<String, Object> e : ext.entrySet()) {
                out.add(pair(e.getKey(), e.getValue()));
            }
            return out;
        }
        ByteBuffer hb = ByteBuffer.wrap(header);
        hb.position(13);
        int remarkLen = hb.getInt();
        hb.position(hb.position() + remarkLen);
        int extLen = hb.getInt();
        int end = hb.position() + extLen;
        while (hb.position() < end) {
            byte[] k = new byte[hb.getShort()];
            hb.get(k);
            byte[] v = new byte[hb.getInt()];
            hb.get(v);
            // A zero-length value was a Java "" (the writer skips nulls).
            out.add(pair(new String(k, StandardCharsets.UTF_8), new String(v, StandardCharsets.UTF_8)));
        }
        return extLen == 0 ? null : out;
    }

    JSONObject frame(String name, RemotingCommand cmd, SerializeType type, Class<? extends CommandCustomHeader> headerClass,
        String note) throws Exception {
        cmd.setSerializeTypeCurrentRPC(type);
        JSONObject c = newCase(name + "_" + type.name().toLowerCase(), "frame");
        c.put("serialize_type", type.name());
        if (note != null) {
            c.put("note", note);
        }
        JSONObject input = obj();
        input.put("code", cmd.getCode());
        input.put("language", cmd.getLanguage() == null ? null : cmd.getLanguage().name());
        input.put("version", cmd.getVersion());
        input.put("opaque", cmd.getOpaque());
        input.put("flag", cmd.getFlag());
        input.put("remark", cmd.getRemark());
        if (cmd.readCustomHeader() != null) {
            JSONObject h = obj();
            h.put("class", cmd.readCustomHeader().getClass().getSimpleName());
            h.put("fields", headerFields(cmd.readCustomHeader()));
            c.put("header", h);
        }
        // What goes on the socket: NettyEncoder = fastEncodeHeader + body.
        ByteBuf buf = Unpooled.buffer();
        cmd.fastEncodeHeader(buf);
        if (cmd.getBody() != null) {
            buf.writeBytes(cmd.getBody());
        }
        byte[] wire = new byte[buf.readableBytes()];
        buf.readBytes(wire);
        input.put("ext_fields", wireExtFields(wire, type));
        input.put("body_hex", hex(cmd.getBody()));
        c.put("input", input);
        c.put("hex", hex(wire));
        // The older encode() path; differs only for FastCodesHeader in ROCKETMQ (HashMap order).
        ByteBuffer enc = cmd.encode();
        byte[] encBytes = new byte[enc.remaining()];
        enc.get(encBytes);
        if (!Arrays.equals(encBytes, wire)) {
            c.put("hex_encode", hex(encBytes));
        }
        // How Java reads those bytes back (Netty strips the length prefix first).
        RemotingCommand back = RemotingCommand.decode(ByteBuffer.wrap(Arrays.copyOfRange(wire, 4, wire.length)));
        JSONObject dec = obj();
        dec.put("code", back.getCode());
        dec.put("language", back.getLanguage() == null ? null : back.getLanguage().name());
        dec.put("version", back.getVersion());
        dec.put("opaque", back.getOpaque());
        dec.put("flag", back.getFlag());
        dec.put("remark", back.getRemark());
        dec.put("serialize_type", back.getSerializeTypeCurrentRPC().name());
        if (back.getExtFields() == null) {
            dec.put("ext_fields", null);
        } else {
            JSONArray ext = new JSONArray();
            for (Map.Entry<String, String> e : new TreeMap<>(back.getExtFields()).entrySet()) {
                ext.add(pair(e.getKey(), e.getValue()));
            }
            dec.put("ext_fields", ext);
        }
        dec.put("body_hex", hex(back.getBody()));
        if (headerClass != null) {
            CommandCustomHeader h = back.decodeCommandCustomHeader(headerClass);
            JSONObject dh = obj();
            dh.put("class", headerClass.getSimpleName());
            dh.put("fields", headerFields(h));
            dec.put("header", dh);
        }
        c.put("decoded", dec);
        add(c);
        return c;
    }

    /** A command is built twice (encoding mutates it), once per serialize type. */
    interface CmdFactory {
        RemotingCommand make() throws Exception;
    }

    void bothTypes(String name, CmdFactory f, Class<? extends CommandCustomHeader> headerClass, String note)
        throws Exception {
        frame(name, f.make(), SerializeType.JSON, headerClass, note);
        frame(name, f.make(), SerializeType.ROCKETMQ, headerClass, note);
    }

    /** The Java client builds V1 and converts it (createSendMessageRequestHeaderV2). */
    static SendMessageRequestHeaderV2 v2(int queueId, String properties, boolean batch) {
        SendMessageRequestHeader v1 = new SendMessageRequestHeader();
        v1.setProducerGroup("PG");
        v1.setTopic("TopicTest");
        v1.setDefaultTopic("TBW102");
        v1.setDefaultTopicQueueNums(4);
        v1.setQueueId(queueId);
        v1.setSysFlag(0);
        v1.setBornTimestamp(T0);
        v1.setFlag(0);
        v1.setProperties(properties);
        v1.setReconsumeTimes(0);
        v1.setUnitMode(false);
        v1.setBatch(batch);
        v1.setBrokerName("broker-a");
        return SendMessageRequestHeaderV2.createSendMessageRequestHeaderV2(v1);
    }

    static String props(String... kv) {
        Map<String, String> m = new HashMap<>();
        for (int i = 0; i < kv.length; i += 2) {
            m.put(kv[i], kv[i + 1]);
        }
        return MessageDecoder.messageProperties2String(m);
    }

    void frames(byte[] routeBody, byte[] heartbeatBody, byte[] registerBody, byte[] pullBody, byte[] batchBody,
        byte[] lockBody) throws Exception {
        bothTypes("get_route_info", () -> {
            GetRouteInfoRequestHeader h = new GetRouteInfoRequestHeader();
            h.setTopic("TopicTest");
            return request(RequestCode.GET_ROUTEINFO_BY_TOPIC, h, 7);
        }, GetRouteInfoRequestHeader.class, null);

        bothTypes("get_route_info_standard_only", () -> {
            GetRouteInfoRequestHeader h = new GetRouteInfoRequestHeader();
            h.setTopic("%RETRY%CG");
            h.setAcceptStandardJsonOnly(true);
            RemotingCommand cmd = request(RequestCode.GET_ROUTEINFO_BY_TOPIC, h, 8);
            cmd.setLanguage(LanguageCode.GO);
            cmd.setVersion(317);
            return cmd;
        }, GetRouteInfoRequestHeader.class, "Go client version 317");

        bothTypes("route_response", () -> {
            RemotingCommand r = RemotingCommand.createResponseCommand(ResponseCode.SUCCESS, null);
            r.setOpaque(7);
            r.setVersion(VERSION);
            r.setBody(routeBody);
            return r;
        }, null, "no header, no remark, JSON body");

        bothTypes("topic_not_exist", () -> {
            RemotingCommand r = RemotingCommand.createResponseCommand(ResponseCode.TOPIC_NOT_EXIST,
                "No topic route info in name server for the topic: X\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details.");
            r.setOpaque(7);
            r.setVersion(VERSION);
            return r;
        }, null, null);

        bothTypes("send_message_v1", () -> {
            SendMessageRequestHeader h = new SendMessageRequestHeader();
            h.setProducerGroup("PG");
            h.setTopic("TopicTest");
            h.setDefaultTopic("TBW102");
            h.setDefaultTopicQueueNums(4);
            h.setQueueId(0);
            h.setSysFlag(0);
            h.setBornTimestamp(T0);
            h.setFlag(0);
            h.setProperties(props("WAIT", "true", "UNIQ_KEY", "C0A8000A1F9018B4AAC2000000000000", "TAGS", "TagA"));
            h.setReconsumeTimes(0);
            h.setUnitMode(false);
            h.setBatch(false);
            h.setBrokerName("broker-a");
            RemotingCommand cmd = request(RequestCode.SEND_MESSAGE, h, 11);
            cmd.setBody(utf8("Hello RocketMQ"));
            return cmd;
        }, SendMessageRequestHeader.class, null);

        bothTypes("send_message_v2", () -> {
            SendMessageRequestHeaderV2 h = v2(1, props("WAIT", "true", "UNIQ_KEY", "C0A8000A1F9018B4AAC2000000000001", "KEYS", "k1 k2"), false);
            RemotingCommand cmd = request(RequestCode.SEND_MESSAGE_V2, h, 12);
            cmd.setBody(utf8("Hello V2"));
            return cmd;
        }, SendMessageRequestHeaderV2.class, "FastCodesHeader: ROCKETMQ writes its a..n fields in declaration order");

        bothTypes("send_batch_message", () -> {
            SendMessageRequestHeaderV2 h = v2(2, props("WAIT", "true", "UNIQ_KEY", "C0A8000A1F9018B4AAC20000000000FF"), true);
            RemotingCommand cmd = request(RequestCode.SEND_BATCH_MESSAGE, h, 13);
            cmd.setBody(batchBody);
            return cmd;
        }, SendMessageRequestHeaderV2.class, null);

        bothTypes("send_response", () -> {
            RemotingCommand r = RemotingCommand.createResponseCommand(SendMessageResponseHeader.class);
            SendMessageResponseHeader h = (SendMessageResponseHeader) r.readCustomHeader();
            h.setMsgId("C0A8001400002A9F00000000000004D2");
            h.setQueueId(1);
            h.setQueueOffset(5L);
            h.setTransactionId("C0A8000A1F9018B4AAC2000000000001");
            r.addExtField("MSG_REGION", "DefaultRegion");
            r.addExtField("TRACE_ON", "true");
            r.setCode(ResponseCode.SUCCESS);
            r.setOpaque(12);
            r.setVersion(VERSION);
            return r;
        }, SendMessageResponseHeader.class, "FastCodesHeader fields first, then MSG_REGION/TRACE_ON");

        bothTypes("pull_message", () -> {
            PullMessageRequestHeader h = new PullMessageRequestHeader();
            h.setConsumerGroup("CG");
            h.setTopic("TopicTest");
            h.setQueueId(3);
            h.setQueueOffset(100L);
            h.setMaxMsgNums(32);
            h.setSysFlag(3);
            h.setCommitOffset(99L);
            h.setSuspendTimeoutMillis(15000L);
            h.setSubscription("TagA || TagB");
            h.setSubVersion(T0);
            h.setExpressionType("TAG");
            h.setMaxMsgBytes(262144);
            h.setBrokerName("broker-a");
            return request(RequestCode.PULL_MESSAGE, h, 21);
        }, PullMessageRequestHeader.class, null);

        bothTypes("pull_response_found", () -> {
            RemotingCommand r = RemotingCommand.createResponseCommand(PullMessageResponseHeader.class);
            PullMessageResponseHeader h = (PullMessageResponseHeader) r.readCustomHeader();
            h.setSuggestWhichBrokerId(0L);
            h.setNextBeginOffset(103L);
            h.setMinOffset(0L);
            h.setMaxOffset(103L);
            h.setTopicSysFlag(0);
            h.setGroupSysFlag(0);
            r.setCode(ResponseCode.SUCCESS);
            r.setRemark("FOUND");
            r.setOpaque(21);
            r.setVersion(VERSION);
            r.setBody(pullBody);
            return r;
        }, PullMessageResponseHeader.class, "body = concatenated stored records");

        bothTypes("pull_not_found", () -> {
            RemotingCommand r = RemotingCommand.createResponseCommand(PullMessageResponseHeader.class);
            PullMessageResponseHeader h = (PullMessageResponseHeader) r.readCustomHeader();
            h.setSuggestWhichBrokerId(1L);
            h.setNextBeginOffset(103L);
            h.setMinOffset(0L);
            h.setMaxOffset(103L);
            r.setCode(ResponseCode.PULL_NOT_FOUND);
            r.setRemark("OFFSET_OVERFLOW_ONE");
            r.setOpaque(22);
            r.setVersion(VERSION);
            return r;
        }, PullMessageResponseHeader.class, null);

        bothTypes("query_consumer_offset", () -> {
            QueryConsumerOffsetRequestHeader h = new QueryConsumerOffsetRequestHeader();
            h.setConsumerGroup("CG");
            h.setTopic("TopicTest");
            h.setQueueId(2);
            h.setSetZeroIfNotFound(false);
            h.setBrokerName("broker-a");
            return request(RequestCode.QUERY_CONSUMER_OFFSET, h, 31);
        }, QueryConsumerOffsetRequestHeader.class, null);

        bothTypes("query_consumer_offset_response", () -> {
            RemotingCommand r = RemotingCommand.createResponseCommand(QueryConsumerOffsetResponseHeader.class);
            ((QueryConsumerOffsetResponseHeader) r.readCustomHeader()).setOffset(9876543210L);
            r.setCode(ResponseCode.SUCCESS);
            r.setOpaque(31);
            r.setVersion(VERSION);
            return r;
        }, QueryConsumerOffsetResponseHeader.class, null);

        bothTypes("update_consumer_offset_oneway", () -> {
            UpdateConsumerOffsetRequestHeader h = new UpdateConsumerOffsetRequestHeader();
            h.setConsumerGroup("CG");
            h.setTopic("TopicTest");
            h.setQueueId(2);
            h.setCommitOffset(42L);
            h.setBrokerName("broker-a");
            RemotingCommand cmd = request(RequestCode.UPDATE_CONSUMER_OFFSET, h, 32);
            cmd.markOnewayRPC();
            return cmd;
        }, UpdateConsumerOffsetRequestHeader.class, null);

        bothTypes("get_max_offset", () -> {
            GetMaxOffsetRequestHeader h = new GetMaxOffsetRequestHeader();
            h.setTopic("TopicTest");
            h.setQueueId(0);
            h.setBrokerName("broker-a");
            return request(RequestCode.GET_MAX_OFFSET, h, 33);
        }, GetMaxOffsetRequestHeader.class, "primitive committed=true always sent");

        bothTypes("get_max_offset_response", () -> {
            RemotingCommand r = RemotingCommand.createResponseCommand(GetMaxOffsetResponseHeader.class);
            ((GetMaxOffsetResponseHeader) r.readCustomHeader()).setOffset(-1L);
            r.setCode(ResponseCode.SUCCESS);
            r.setOpaque(33);
            r.setVersion(VERSION);
            return r;
        }, GetMaxOffsetResponseHeader.class, null);

        bothTypes("heart_beat", () -> {
            RemotingCommand cmd = request(RequestCode.HEART_BEAT, new HeartbeatRequestHeader(), 41);
            cmd.setBody(heartbeatBody);
            return cmd;
        }, HeartbeatRequestHeader.class, "header with no fields: JSON has extFields {}, ROCKETMQ has none");

        bothTypes("heart_beat_response", () -> {
            RemotingCommand r = RemotingCommand.createResponseCommand(ResponseCode.SUCCESS, null);
            r.addExtField("IS_SUPPORT_HEART_BEAT_V2", "true");
            r.addExtField("IS_SUB_CHANGE", "true");
            r.setOpaque(41);
            r.setVersion(VERSION);
            return r;
        }, null, null);

        bothTypes("register_broker", () -> {
            RegisterBrokerRequestHeader h = new RegisterBrokerRequestHeader();
            h.setBrokerName("broker-a");
            h.setBrokerAddr("192.168.0.20:10911");
            h.setClusterName("DefaultCluster");
            h.setHaServerAddr("192.168.0.20:10912");
            h.setBrokerId(0L);
            h.setEnableActingMaster(false);
            h.setCompressed(false);
            h.setBodyCrc32(UtilAll.crc32(registerBody));
            RemotingCommand cmd = request(RequestCode.REGISTER_BROKER, h, 51);
            cmd.addExtField("__ZONE_NAME", "zone-1");
            cmd.setBody(registerBody);
            return cmd;
        }, RegisterBrokerRequestHeader.class, null);

        bothTypes("get_broker_cluster_info", () -> request(RequestCode.GET_BROKER_CLUSTER_INFO, null, 52),
            null, "request without header: no extFields at all");

        bothTypes("create_topic", () -> {
            CreateTopicRequestHeader h = new CreateTopicRequestHeader();
            h.setTopic("TopicNew");
            h.setDefaultTopic("TBW102");
            h.setReadQueueNums(8);
            h.setWriteQueueNums(8);
            h.setPerm(6);
            h.setTopicFilterType(TopicFilterType.SINGLE_TAG.name());
            h.setTopicSysFlag(0);
            h.setOrder(false);
            h.setAttributes("+message.type=NORMAL");
            return request(RequestCode.UPDATE_AND_CREATE_TOPIC, h, 61);
        }, CreateTopicRequestHeader.class, null);

        bothTypes("view_message_by_id", () -> {
            ViewMessageRequestHeader h = new ViewMessageRequestHeader();
            h.setTopic("TopicTest");
            h.setOffset(1234L);
            return request(RequestCode.VIEW_MESSAGE_BY_ID, h, 62);
        }, ViewMessageRequestHeader.class, null);

        bothTypes("query_message", () -> {
            QueryMessageRequestHeader h = new QueryMessageRequestHeader();
            h.setTopic("TopicTest");
            h.setKey("C0A8000A1F9018B4AAC2000000000001");
            h.setMaxNum(32);
            h.setBeginTimestamp(0L);
            h.setEndTimestamp(Long.MAX_VALUE);
            RemotingCommand cmd = request(RequestCode.QUERY_MESSAGE, h, 63);
            cmd.addExtField("_UNIQUE_KEY_QUERY", "true");
            return cmd;
        }, QueryMessageRequestHeader.class, null);

        bothTypes("end_transaction_oneway", () -> {
            EndTransactionRequestHeader h = new EndTransactionRequestHeader();
            h.setTopic("TopicTest");
            h.setProducerGroup("PG");
            h.setTranStateTableOffset(5L);
            h.setCommitLogOffset(1234L);
            h.setCommitOrRollback(MessageSysFlag.TRANSACTION_COMMIT_TYPE);
            h.setFromTransactionCheck(true);
            h.setMsgId("C0A8000A1F9018B4AAC2000000000001");
            h.setTransactionId("C0A8000A1F9018B4AAC2000000000001");
            h.setBrokerName("broker-a");
            RemotingCommand cmd = request(RequestCode.END_TRANSACTION, h, 64);
            cmd.setRemark("executeLocalTransactionBranch exception: java.lang.IllegalStateException: \u4e2d\u6587");
            cmd.markOnewayRPC();
            return cmd;
        }, EndTransactionRequestHeader.class, null);

        bothTypes("consumer_send_msg_back", () -> {
            ConsumerSendMsgBackRequestHeader h = new ConsumerSendMsgBackRequestHeader();
            h.setOffset(1234L);
            h.setGroup("CG");
            h.setDelayLevel(0);
            h.setOriginMsgId("C0A8000A1F9018B4AAC2000000000001");
            h.setOriginTopic("TopicTest");
            h.setMaxReconsumeTimes(16);
            h.setBrokerName("broker-a");
            return request(RequestCode.CONSUMER_SEND_MSG_BACK, h, 65);
        }, ConsumerSendMsgBackRequestHeader.class, "primitive unitMode=false always sent");

        bothTypes("lock_batch_mq", () -> {
            LockBatchMqRequestHeader h = new LockBatchMqRequestHeader();
            h.setBrokerName("broker-a");
            RemotingCommand cmd = request(RequestCode.LOCK_BATCH_MQ, h, 66);
            cmd.setBody(lockBody);
            return cmd;
        }, LockBatchMqRequestHeader.class, null);

        bothTypes("system_error", () -> {
            RemotingCommand r = RemotingCommand.createResponseCommand(ResponseCode.SYSTEM_ERROR,
                "java.lang.NullPointerException, org.apache.rocketmq.broker.processor.X.process(X.java:42)");
            r.setOpaque(70);
            r.setVersion(VERSION);
            return r;
        }, null, null);

        bothTypes("tricky_strings", () -> {
            RemotingCommand cmd = request(RequestCode.PUT_KV_CONFIG, null, 71);
            cmd.setRemark(TRICKY);
            cmd.addExtField("namespace", "\u4e2d\u6587\u547d\u540d\u7a7a\u95f4");
            cmd.addExtField("key", "a\"b\\c/d");
            cmd.addExtField("value", "\u0001\u0002\u001f\u007f\t\n\r\b\f");
            cmd.addExtField("empty", "");
            cmd.addExtField("emoji", "\ud83d\ude00");
            cmd.addExtField("lineSep", "a\u2028b\u2029c");
            cmd.addExtField("\u952e", "v");
            return cmd;
        }, null, "non-ASCII, control chars, quotes, backslash, slash, empty value; ROCKETMQ reads '' back as null");

        bothTypes("empty_remark", () -> {
            RemotingCommand r = RemotingCommand.createResponseCommand(ResponseCode.SUCCESS, "");
            r.setOpaque(72);
            r.setVersion(VERSION);
            return r;
        }, null, "JSON keeps \"\", ROCKETMQ writes length 0 which reads back as null");

        bothTypes("pop_code_mangled", () -> {
            RemotingCommand cmd = request(RequestCode.POP_MESSAGE, null, 73);
            cmd.addExtField("consumerGroup", "CG");
            cmd.addExtField("topic", "TopicTest");
            cmd.addExtField("queueId", "-1");
            return cmd;
        }, null, "code 200050 > 32767: ROCKETMQ keeps the low 16 bits (3442)");

        bothTypes("negative_opaque", () -> {
            GetRouteInfoRequestHeader h = new GetRouteInfoRequestHeader();
            h.setTopic("TopicTest");
            RemotingCommand cmd = request(RequestCode.GET_ROUTEINFO_BY_TOPIC, h, -123456789);
            cmd.setLanguage(LanguageCode.PYTHON);
            return cmd;
        }, GetRouteInfoRequestHeader.class, null);

        bothTypes("min_opaque_oneway", () -> {
            RemotingCommand cmd = request(RequestCode.GET_BROKER_CLUSTER_INFO, null, Integer.MIN_VALUE);
            cmd.setLanguage(LanguageCode.NODE_JS);
            cmd.setVersion(0);
            cmd.markOnewayRPC();
            return cmd;
        }, null, null);
    }

    // ---- JSON bodies ----------------------------------------------------------------------------

    static final SerializerFeature[] STANDARD = {SerializerFeature.BrowserCompatible,
        SerializerFeature.QuoteFieldNames, SerializerFeature.SkipTransientField, SerializerFeature.MapSortField};

    /** Neutral, standard-JSON view of a body object with Java's own collection order. */
    static Object model(Object o) {
        String s = JSON.toJSONString(o, SerializerFeature.WriteNonStringKeyAsString,
            SerializerFeature.DisableCircularReferenceDetect);
        return JSON.parse(s, Feature.OrderedField);
    }

    void body(String name, String type, String dialect, byte[] bytes, Object modelOf, String note) {
        JSONObject c = newCase(name, "body");
        c.put("body_type", type);
        c.put("dialect", dialect);
        if (note != null) {
            c.put("note", note);
        }
        c.put("hex", hex(bytes));
        if (!dialect.equals("compressed")) {
            c.put("text", new String(bytes, StandardCharsets.UTF_8));
        }
        c.put("model", model(modelOf));
        add(c);
    }

    static BrokerData broker(String cluster, String name, long[] ids, String[] addrs) {
        HashMap<Long, String> m = new HashMap<>();
        for (int i = 0; i < ids.length; i++) {
            m.put(ids[i], addrs[i]);
        }
        return new BrokerData(cluster, name, m);
    }

    static QueueData queue(String brokerName, int r, int w, int perm, int sysFlag) {
        QueueData q = new QueueData();
        q.setBrokerName(brokerName);
        q.setReadQueueNums(r);
        q.setWriteQueueNums(w);
        q.setPerm(perm);
        q.setTopicSysFlag(sysFlag);
        return q;
    }

    TopicRouteData routeSingle() {
        TopicRouteData r = new TopicRouteData();
        r.setQueueDatas(new ArrayList<>(Arrays.asList(queue("broker-a", 4, 4, 6, 0))));
        r.setBrokerDatas(new ArrayList<>(Arrays.asList(broker("DefaultCluster", "broker-a", new long[] {0, 1},
            new String[] {"127.0.0.1:10911", "127.0.0.1:10921"}))));
        r.setFilterServerTable(new HashMap<>());
        return r;
    }

    TopicRouteData routeMulti() {
        TopicRouteData r = new TopicRouteData();
        r.setQueueDatas(new ArrayList<>(Arrays.asList(queue("broker-b", 8, 8, 6, 0), queue("broker-a", 4, 2, 4, 1))));
        BrokerData b = broker("Cluster-\u4e2d", "broker-b", new long[] {10, 2, 1, 0},
            new String[] {"10.0.0.10:10911", "10.0.0.2:10911", "10.0.0.1:10911", "10.0.0.0:10911"});
        b.setZoneName("zone/\u00e9\u4e2d");
        b.setEnableActingMaster(true);
        BrokerData a = broker("DefaultCluster", "broker-a", new long[] {0}, new String[] {"[::1]:10911"});
        r.setBrokerDatas(new ArrayList<>(Arrays.asList(b, a)));
        HashMap<String, List<String>> fst = new HashMap<>();
        fst.put("10.0.0.0:10911", new ArrayList<>(Arrays.asList("10.0.0.0:30000")));
        r.setFilterServerTable(fst);
        r.setOrderTopicConf("broker-b:8;broker-a:4");
        return r;
    }

    byte[] bodies() throws Exception {
        TopicRouteData single = routeSingle();
        byte[] routeStd = single.encode(STANDARD);
        body("route_single_standard", "TopicRouteData", "standard", routeStd, single, "NameServer path for version >= 401");
        body("route_single_plain", "TopicRouteData", "plain", single.encode(), single, "NameServer path for version < 401");
        TopicRouteData multi = routeMulti();
        body("route_multi_standard", "TopicRouteData", "standard", multi.encode(STANDARD), multi,
            "MapSortField sorts Long keys numerically; BrowserCompatible escapes non-ASCII and '/'");
        body("route_multi_plain", "TopicRouteData", "plain", multi.encode(), multi, null);
        TopicRouteData empty = new TopicRouteData();
        empty.setQueueDatas(new ArrayList<>());
        empty.setBrokerDatas(new ArrayList<>());
        empty.setFilterServerTable(new HashMap<>());
        body("route_empty_standard", "TopicRouteData", "standard", empty.encode(STANDARD), empty, null);

        ClusterInfo ci = new ClusterInfo();
        HashMap<String, BrokerData> bat = new HashMap<>();
        bat.put("broker-a", broker("DefaultCluster", "broker-a", new long[] {0, 1},
            new String[] {"127.0.0.1:10911", "127.0.0.1:10921"}));
        ci.setBrokerAddrTable(bat);
        HashMap<String, java.util.Set<String>> cat = new HashMap<>();
        cat.put("DefaultCluster", new java.util.HashSet<>(Arrays.asList("broker-a")));
        ci.setClusterAddrTable(cat);
        body("cluster_info_plain", "ClusterInfo", "plain", ci.encode(), ci, "always plain from the NameServer");
        body("cluster_info_standard", "ClusterInfo", "standard", ci.encode(STANDARD), ci, null);
        ClusterInfo ci2 = new ClusterInfo();
        HashMap<String, BrokerData> bat2 = new HashMap<>();
        BrokerData bb = broker("C2", "broker-b", new long[] {0, 3}, new String[] {"10.0.0.2:10911", "10.0.0.3:10911"});
        bb.setZoneName("z1");
        bat2.put("broker-b", bb);
        bat2.put("broker-a", broker("C1", "broker-a", new long[] {0}, new String[] {"10.0.0.1:10911"}));
        ci2.setBrokerAddrTable(bat2);
        HashMap<String, java.util.Set<String>> cat2 = new HashMap<>();
        cat2.put("C1", new java.util.HashSet<>(Arrays.asList("broker-a")));
        cat2.put("C2", new java.util.HashSet<>(Arrays.asList("broker-b")));
        ci2.setClusterAddrTable(cat2);
        body("cluster_info_two_clusters_plain", "ClusterInfo", "plain", ci2.encode(), ci2, null);
        body("cluster_info_two_clusters_standard", "ClusterInfo", "standard", ci2.encode(STANDARD), ci2, null);

        HeartbeatData hb = new HeartbeatData();
        hb.setClientID("192.168.0.10@12345#1234567890");
        ProducerData pd = new ProducerData();
        pd.setGroupName("PG");
        hb.getProducerDataSet().add(pd);
        ConsumerData cd = new ConsumerData();
        cd.setGroupName("CG");
        cd.setConsumeType(ConsumeType.CONSUME_PASSIVELY);
        cd.setMessageModel(MessageModel.CLUSTERING);
        cd.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET);
        SubscriptionData sd = FilterAPI.buildSubscriptionData("TopicTest", "TagA || TagB");
        sd.setSubVersion(T0);
        cd.getSubscriptionDataSet().add(sd);
        hb.getConsumerDataSet().add(cd);
        byte[] hbBody = hb.encode();
        body("heartbeat_producer_consumer", "HeartbeatData", "plain", hbBody, hb, null);

        HeartbeatData hb2 = new HeartbeatData();
        hb2.setClientID("10.0.0.5@DEFAULT");
        ProducerData pd2 = new ProducerData();
        pd2.setGroupName("PG-\u4e2d\u6587");
        hb2.getProducerDataSet().add(pd2);
        body("heartbeat_producer_only", "HeartbeatData", "plain", hb2.encode(), hb2, null);

        HeartbeatData hb3 = new HeartbeatData();
        hb3.setClientID("10.0.0.6@9999#42@unit");
        hb3.setWithoutSub(true);
        hb3.setHeartbeatFingerprint(-559038737);
        ConsumerData cd3 = new ConsumerData();
        cd3.setGroupName("CG-SQL");
        cd3.setConsumeType(ConsumeType.CONSUME_ACTIVELY);
        cd3.setMessageModel(MessageModel.BROADCASTING);
        cd3.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_TIMESTAMP);
        cd3.setUnitMode(true);
        SubscriptionData sq = FilterAPI.buildSubscriptionData("TopicSql", "a > 5 AND b = 'x'", "SQL92");
        sq.setSubVersion(T0 + 1);
        cd3.getSubscriptionDataSet().add(sq);
        SubscriptionData all = FilterAPI.buildSubscriptionData("%RETRY%CG-SQL", "*");
        all.setSubVersion(T0 + 2);
        cd3.getSubscriptionDataSet().add(all);
        hb3.getConsumerDataSet().add(cd3);
        body("heartbeat_sql92_without_sub", "HeartbeatData", "plain", hb3.encode(), hb3, null);

        RegisterBrokerBody rb = registerBody(false);
        byte[] rbPlain = rb.encode(false);
        body("register_broker_plain", "RegisterBrokerBody", "plain", rbPlain, rb, null);
        body("register_broker_compressed", "RegisterBrokerBody", "compressed", rb.encode(true), rb,
            "zlib BEST_COMPRESSION of the binary layout");
        addDecodedRegister();
        RegisterBrokerBody rb2 = registerBody(true);
        body("register_broker_two_topics_plain", "RegisterBrokerBody", "plain", rb2.encode(false), rb2, null);
        body("register_broker_two_topics_compressed", "RegisterBrokerBody", "compressed", rb2.encode(true), rb2, null);
        addDecodedRegister();

        LockBatchRequestBody lb = new LockBatchRequestBody();
        lb.setConsumerGroup("CG");
        lb.setClientId("192.168.0.10@12345#1234567890");
        lb.setOnlyThisBroker(true);
        lb.getMqSet().add(new MessageQueue("TopicTest", "broker-a", 0));
        lb.getMqSet().add(new MessageQueue("TopicTest", "broker-a", 1));
        byte[] lockBody = lb.encode();
        body("lock_batch_request", "LockBatchRequestBody", "plain", lockBody, lb, null);

        TopicStatsTable ts = new TopicStatsTable();
        for (int q = 0; q < 2; q++) {
            TopicOffset to = new TopicOffset();
            to.setMinOffset(q);
            to.setMaxOffset(10 + q);
            to.setLastUpdateTimestamp(q == 0 ? T0 : 0);
            ts.getOffsetTable().put(new MessageQueue("TopicTest", "broker-a", q), to);
        }
        ts.setTopicPutTps(0.0);
        body("topic_stats_table", "TopicStatsTable", "plain", ts.encode(), ts, "MessageQueue object keys");

        ConsumeStats cs = new ConsumeStats();
        OffsetWrapper ow = new OffsetWrapper();
        ow.setBrokerOffset(10);
        ow.setConsumerOffset(5);
        ow.setPullOffset(6);
        ow.setLastTimestamp(T0);
        cs.getOffsetTable().put(new MessageQueue("TopicTest", "broker-a", 0), ow);
        cs.setConsumeTps(1.5);
        body("consume_stats", "ConsumeStats", "plain", cs.encode(), cs, null);

        KVTable kv = new KVTable();
        kv.getTable().put("brokerVersion", "479");
        kv.getTable().put("msgPutTotalTodayNow", "0");
        kv.getTable().put("bootTimestamp", String.valueOf(T0));
        kv.getTable().put("\u4e2d", "\"/\\");
        body("kv_table", "KVTable", "plain", kv.encode(), kv, null);

        LockBatchResponseBody lr = new LockBatchResponseBody();
        lr.getLockOKMQSet().add(new MessageQueue("TopicTest", "broker-a", 1));
        body("lock_batch_response", "LockBatchResponseBody", "plain", lr.encode(), lr, null);

        TopicList tl = new TopicList();
        tl.getTopicList().add("TopicTest");
        tl.getTopicList().add("%RETRY%CG");
        tl.getTopicList().add("\u4e3b\u9898");
        body("topic_list_nameserver", "TopicList", "plain", tl.encode(), tl, "brokerAddr null: omitted");

        GetConsumerListByGroupResponseBody cl = new GetConsumerListByGroupResponseBody();
        cl.setConsumerIdList(new ArrayList<>(Arrays.asList("192.168.0.10@12345#1234567890", "192.168.0.11@DEFAULT")));
        body("consumer_list_by_group", "GetConsumerListByGroupResponseBody", "plain", cl.encode(), cl, null);

        this.routeBody = routeStd;
        this.heartbeatBody = hbBody;
        this.registerBody = rbPlain;
        this.lockBody = lockBody;
        return routeStd;
    }

    /** What the NameServer reads back from the last compressed body (only part of the bean survives). */
    void addDecodedRegister() throws Exception {
        JSONObject c = (JSONObject) cases.get(cases.size() - 1);
        byte[] bytes = UtilAll.string2bytes(c.getString("hex").toUpperCase());
        RegisterBrokerBody back = RegisterBrokerBody.decode(bytes, true, org.apache.rocketmq.common.MQVersion.Version.V5_3_3);
        TopicConfigAndMappingSerializeWrapper w = back.getTopicConfigSerializeWrapper();
        JSONObject m = obj();
        m.put("dataVersion", model(w.getDataVersion()));
        m.put("topicConfigTable", model(w.getTopicConfigTable()));
        m.put("filterServerList", model(back.getFilterServerList()));
        m.put("topicQueueMappingInfoMap", model(w.getTopicQueueMappingInfoMap()));
        c.put("decoded_model", m);
        ByteArrayOutputStream inflated = new ByteArrayOutputStream();
        try (java.util.zip.InflaterInputStream in = new java.util.zip.InflaterInputStream(new java.io.ByteArrayInputStream(bytes))) {
            byte[] buf = new byte[4096];
            int n;
            while ((n = in.read(buf)) > 0) {
                inflated.write(buf, 0, n);
            }
        }
        c.put("inflated_hex", hex(inflated.toByteArray()));
    }

    byte[] routeBody;
    byte[] heartbeatBody;
    byte[] registerBody;
    byte[] lockBody;

    static RegisterBrokerBody registerBody(boolean two) {
        RegisterBrokerBody rb = new RegisterBrokerBody();
        TopicConfigAndMappingSerializeWrapper w = new TopicConfigAndMappingSerializeWrapper();
        DataVersion dv = new DataVersion();
        dv.setTimestamp(T0);
        dv.setCounter(new java.util.concurrent.atomic.AtomicLong(3));
        dv.setStateVersion(0);
        w.setDataVersion(dv);
        DataVersion mdv = new DataVersion();
        mdv.setTimestamp(T0 + 5);
        mdv.setCounter(new java.util.concurrent.atomic.AtomicLong(0));
        w.setMappingDataVersion(mdv);
        ConcurrentHashMap<String, TopicConfig> table = new ConcurrentHashMap<>();
        table.put("TopicTest", new TopicConfig("TopicTest", 4, 4, 6, 0));
        if (two) {
            TopicConfig t2 = new TopicConfig("%RETRY%CG", 1, 1, 6, 0);
            t2.setTopicFilterType(TopicFilterType.MULTI_TAG);
            t2.setOrder(true);
            HashMap<String, String> attrs = new HashMap<>();
            attrs.put("+message.type", "FIFO");
            t2.setAttributes(attrs);
            table.put("%RETRY%CG", t2);
            table.put("TBW102", new TopicConfig("TBW102", 8, 8, 7, 0));
        }
        w.setTopicConfigTable(table);
        rb.setTopicConfigSerializeWrapper(w);
        rb.setFilterServerList(new ArrayList<>(two ? Arrays.asList("10.0.0.1:30000") : Arrays.<String>asList()));
        return rb;
    }

    // ---- messages -------------------------------------------------------------------------------

    final MessageExtEncoder encoder;

    GoldenVectors() {
        MessageStoreConfig sc = new MessageStoreConfig();
        sc.setMaxMessageSize(256 * 1024);
        encoder = new MessageExtEncoder(sc);
    }

    static InetSocketAddress host(String ip, int port) throws Exception {
        return new InetSocketAddress(InetAddress.getByName(ip), port);
    }

    static JSONArray orderedProps(String s) {
        JSONArray out = new JSONArray();
        if (s == null) {
            return out;
        }
        for (String seg : s.split("\u0002")) {
            int i = seg.indexOf('\u0001');
            if (i > 0) {
                out.add(pair(seg.substring(0, i), seg.substring(i + 1)));
            }
        }
        return out;
    }

    static String hostStr(java.net.SocketAddress a) {
        InetSocketAddress i = (InetSocketAddress) a;
        return i.getAddress().getHostAddress();
    }

    /** A commit-log record as the store writes it (MessageExtEncoder), physical offset patched in. */
    byte[] storeRecord(MessageExtBrokerInner m, long physicalOffset) {
        if (encoder.encode(m) != null) {
            throw new IllegalStateException("store encoder refused the message");
        }
        ByteBuffer b = encoder.getEncoderBuffer();
        int len = b.getInt(0);
        byte[] out = new byte[len];
        b.position(0);
        b.get(out);
        ByteBuffer.wrap(out).putLong(28, physicalOffset); // as CommitLog's append callback does
        return out;
    }

    static MessageExtBrokerInner inner(String topic, byte[] body, int queueId, long queueOffset, int sysFlag,
        InetSocketAddress born, InetSocketAddress store, Map<String, String> properties) {
        MessageExtBrokerInner m = new MessageExtBrokerInner();
        m.setTopic(topic);
        m.setBody(body);
        m.setQueueId(queueId);
        m.setQueueOffset(queueOffset);
        m.setFlag(0);
        m.setSysFlag(sysFlag);
        m.setBornTimestamp(T0);
        m.setBornHost(born);
        m.setStoreTimestamp(T0 + 100);
        m.setStoreHost(store);
        m.setReconsumeTimes(0);
        m.setPreparedTransactionOffset(0);
        m.setBodyCRC(UtilAll.crc32(body));
        m.setPropertiesString(MessageDecoder.messageProperties2String(properties));
        m.setVersion(MessageVersion.MESSAGE_VERSION_V1);
        return m;
    }

    static JSONObject messageFields(MessageExt m, byte[] rawRecord, byte[] decompressed) {
        JSONObject f = obj();
        ByteBuffer rb = ByteBuffer.wrap(rawRecord);
        f.put("store_size", m.getStoreSize());
        f.put("magic_code", rb.getInt(4));
        f.put("message_version", MessageVersion.valueOfMagicCode(rb.getInt(4)).name());
        f.put("body_crc", m.getBodyCRC());
        f.put("queue_id", m.getQueueId());
        f.put("flag", m.getFlag());
        f.put("queue_offset", m.getQueueOffset());
        f.put("commit_log_offset", m.getCommitLogOffset());
        f.put("sys_flag", m.getSysFlag());
        f.put("born_timestamp", m.getBornTimestamp());
        f.put("born_host", hostStr(m.getBornHost()));
        f.put("born_port", ((InetSocketAddress) m.getBornHost()).getPort());
        f.put("store_timestamp", m.getStoreTimestamp());
        f.put("store_host", hostStr(m.getStoreHost()));
        f.put("store_port", ((InetSocketAddress) m.getStoreHost()).getPort());
        f.put("reconsume_times", m.getReconsumeTimes());
        f.put("prepared_transaction_offset", m.getPreparedTransactionOffset());
        f.put("body_hex", hex(m.getBody()));
        f.put("body_decompressed_hex", hex(decompressed));
        f.put("topic", m.getTopic());
        f.put("properties", orderedPropsFromRecord(rawRecord, m));
        f.put("msg_id", m.getMsgId());
        f.put("tags", m.getTags());
        f.put("keys", m.getKeys());
        f.put("tags_code", m.getTags() == null ? 0 : MessageExtBrokerInner.tagsString2tagsCode(m.getTags()));
        return f;
    }

    /** Properties in the order they were written (the decoder's HashMap loses it). */
    static JSONArray orderedPropsFromRecord(byte[] rec, MessageExt m) {
        ByteBuffer b = ByteBuffer.wrap(rec);
        int sysFlag = b.getInt(36);
        int bornLen = (sysFlag & MessageSysFlag.BORNHOST_V6_FLAG) == 0 ? 8 : 20;
        int storeLen = (sysFlag & MessageSysFlag.STOREHOSTADDRESS_V6_FLAG) == 0 ? 8 : 20;
        int pos = 48 + bornLen + 8 + storeLen + 4 + 8;
        pos += 4 + b.getInt(pos);
        boolean v2 = b.getInt(4) == MessageDecoder.MESSAGE_MAGIC_CODE_V2;
        int topicLen = v2 ? b.getShort(pos) : b.get(pos);
        pos += (v2 ? 2 : 1) + topicLen;
        int propLen = b.getShort(pos);
        return orderedProps(new String(rec, pos + 2, propLen, StandardCharsets.UTF_8));
    }

    void storedCase(String name, List<byte[]> records, String note) throws Exception {
        ByteArrayOutputStream all = new ByteArrayOutputStream();
        for (byte[] r : records) {
            all.write(r);
        }
        byte[] body = all.toByteArray();
        JSONObject c = newCase(name, "stored_message");
        if (note != null) {
            c.put("note", note);
        }
        c.put("hex", hex(body));
        JSONArray msgs = new JSONArray();
        ByteBuffer bb = ByteBuffer.wrap(body);
        for (byte[] r : records) {
            MessageExt m = MessageDecoder.decode(bb, true, false, false);
            MessageExt d = MessageDecoder.decode(ByteBuffer.wrap(r), true, true, false);
            if (m == null || d == null) {
                throw new IllegalStateException("Java could not decode its own record in " + name);
            }
            boolean compressed = (m.getSysFlag() & MessageSysFlag.COMPRESSED_FLAG) != 0;
            msgs.add(messageFields(m, r, compressed ? d.getBody() : null));
        }
        c.put("messages", msgs);
        add(c);
    }

    static Map<String, String> stdProps(String uniq, String tags, String keys) {
        Map<String, String> p = new HashMap<>();
        p.put("UNIQ_KEY", uniq);
        if (tags != null) {
            p.put("TAGS", tags);
        }
        if (keys != null) {
            p.put("KEYS", keys);
        }
        p.put("WAIT", "true");
        p.put("CLUSTER", "DefaultCluster");
        return p;
    }

    byte[] messages() throws Exception {
        InetSocketAddress born4 = host("192.168.0.10", 54321);
        InetSocketAddress store4 = host("192.168.0.20", 10911);
        InetSocketAddress born6 = host("fe80::1:2:3:4", 40000);
        InetSocketAddress store6 = host("2001:db8::20", 10911);

        byte[] hello = utf8("Hello");
        byte[] r1 = storeRecord(inner("TopicTest", hello, 1, 5, 0, born4, store4,
            stdProps("C0A8000A1F9018B4AAC2000000000000", "TagA", "k1")), 1234);
        storedCase("stored_v1_ipv4", Arrays.asList(r1), null);

        storedCase("stored_v1_born_ipv6", Arrays.asList(storeRecord(inner("TopicTest", utf8("six"), 0, 0,
            MessageSysFlag.BORNHOST_V6_FLAG, born6, store4, stdProps("FE800000000000000001000200030004303918B4AAC20001", "TagB", null)),
            2048)), "born host IPv6 only");

        storedCase("stored_v1_both_ipv6", Arrays.asList(storeRecord(inner("TopicTest", utf8("both"), 2, 7,
            MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG, born6, store6,
            stdProps("FE800000000000000001000200030004303918B4AAC20002", null, "a b")), 4096)), "56-char offset msg id");

        StringBuilder longTopic = new StringBuilder("LongTopic-");
        while (longTopic.length() < 200) {
            longTopic.append('x');
        }
        MessageExtBrokerInner v2 = inner(longTopic.toString(), utf8("v2 body"), 0, 1, 0, born4, store4,
            stdProps("C0A8000A1F9018B4AAC2000000000003", "TagA", null));
        v2.setVersion(MessageVersion.MESSAGE_VERSION_V2);
        storedCase("stored_v2_long_topic", Arrays.asList(storeRecord(v2, 8192)), "200-char topic, int16 topic length");

        MessageExtBrokerInner v2s = inner("TopicTest", utf8("v2 short"), 0, 2, 0, born4, store4,
            stdProps("C0A8000A1F9018B4AAC2000000000004", null, null));
        v2s.setVersion(MessageVersion.MESSAGE_VERSION_V2);
        storedCase("stored_v2_short_topic", Arrays.asList(storeRecord(v2s, 8500)), null);

        MessageExtBrokerInner v2s6 = inner("TopicTest", utf8("v2 six"), 3, 9,
            MessageSysFlag.BORNHOST_V6_FLAG | MessageSysFlag.STOREHOSTADDRESS_V6_FLAG, born6, store6,
            stdProps("C0A8000A1F9018B4AAC2000000000005", "TagC", null));
        v2s6.setVersion(MessageVersion.MESSAGE_VERSION_V2);
        storedCase("stored_v2_ipv6", Arrays.asList(storeRecord(v2s6, 9000)), null);

        byte[] big = new byte[6000];
        for (int i = 0; i < big.length; i++) {
            big[i] = (byte) ("RocketMQ compresses bodies over 4 KiB. ".charAt(i % 39));
        }
        for (CompressionType ct : new CompressionType[] {CompressionType.ZLIB, CompressionType.LZ4, CompressionType.ZSTD}) {
            byte[] comp = CompressorFactory.getCompressor(ct).compress(big, 5);
            int sf = MessageSysFlag.COMPRESSED_FLAG | ct.getCompressionFlag();
            storedCase("stored_compressed_" + ct.name().toLowerCase(), Arrays.asList(storeRecord(inner("TopicTest", comp,
                0, 11, sf, born4, store4, stdProps("C0A8000A1F9018B4AAC2000000000006", "TagZ", null)), 10000)),
                "body stays compressed in the store");
            compressionCase(ct, big, comp);
        }
        byte[] zlib4x = CompressorFactory.getCompressor(CompressionType.ZLIB).compress(big, 5);
        storedCase("stored_compressed_zlib_4x_flag", Arrays.asList(storeRecord(inner("TopicTest", zlib4x, 0, 12,
            MessageSysFlag.COMPRESSED_FLAG, born4, store4, stdProps("C0A8000A1F9018B4AAC2000000000007", null, null)), 20000)),
            "4.x clients set only bit 0: compression type 0 means zlib");

        MessageExtBrokerInner tx = inner("RMQ_SYS_TRANS_HALF_TOPIC", utf8("half"), 0, 0,
            MessageSysFlag.TRANSACTION_PREPARED_TYPE, born4, store4,
            stdProps("C0A8000A1F9018B4AAC2000000000008", null, null));
        tx.setFlag(7);
        tx.setReconsumeTimes(3);
        tx.setPreparedTransactionOffset(77);
        Map<String, String> txp = stdProps("C0A8000A1F9018B4AAC2000000000008", null, null);
        txp.put("TRAN_MSG", "true");
        txp.put("PGROUP", "PG");
        txp.put("REAL_TOPIC", "TopicTest");
        txp.put("REAL_QID", "1");
        txp.put("\u5c5e\u6027", "\u503c \u4e2d\u6587");
        tx.setPropertiesString(MessageDecoder.messageProperties2String(txp));
        storedCase("stored_transaction_half", Arrays.asList(storeRecord(tx, 30000)), "non-ASCII property");

        storedCase("stored_empty_body_no_props", Arrays.asList(storeRecord(inner("TopicTest", new byte[0], 0, 0, 0,
            born4, store4, new HashMap<>()), 0)), "body length 0, properties length 0");

        // MessageDecoder.encode: the CHECK_TRANSACTION_STATE body path (V1, storeSize recomputed).
        MessageExt me = new MessageExt();
        me.setTopic("TopicTest");
        me.setBody(utf8("check me"));
        me.setQueueId(1);
        me.setQueueOffset(5);
        me.setCommitLogOffset(1234);
        me.setBornTimestamp(T0);
        me.setBornHost(born4);
        me.setStoreTimestamp(T0 + 1);
        me.setStoreHost(store4);
        me.setBodyCRC(UtilAll.crc32(utf8("check me")));
        me.setSysFlag(MessageSysFlag.TRANSACTION_PREPARED_TYPE);
        MessageAccessor.putProperty(me, "UNIQ_KEY", "C0A8000A1F9018B4AAC2000000000009");
        MessageAccessor.putProperty(me, "TRAN_MSG", "true");
        storedCase("stored_message_decoder_encode", Arrays.asList(MessageDecoder.encode(me, false)),
            "MessageDecoder.encode, as sent in CHECK_TRANSACTION_STATE");

        byte[] r2 = storeRecord(inner("TopicTest", utf8("second"), 1, 6, 0, born4, store4,
            stdProps("C0A8000A1F9018B4AAC200000000000A", "TagB", null)), 1234 + r1.length);
        byte[] r3 = storeRecord(inner("TopicTest", utf8("third \u4e2d\u6587"), 1, 7, 0, born4, store4,
            stdProps("C0A8000A1F9018B4AAC200000000000B", "TagA", "k3")), 1234 + r1.length + r2.length);
        storedCase("stored_pull_body_three", Arrays.asList(r1, r2, r3), "a PULL_MESSAGE body");
        ByteArrayOutputStream pull = new ByteArrayOutputStream();
        pull.write(r1);
        pull.write(r2);
        pull.write(r3);
        return pull.toByteArray();
    }

    void compressionCase(CompressionType ct, byte[] raw, byte[] comp) throws Exception {
        JSONObject c = newCase("compress_" + ct.name().toLowerCase(), "compression");
        c.put("type", ct.name());
        c.put("level", 5);
        c.put("sys_flag_bits", ct.getCompressionFlag());
        c.put("input_hex", hex(raw));
        c.put("hex", hex(comp));
        if (!Arrays.equals(CompressorFactory.getCompressor(ct).decompress(comp), raw)) {
            throw new IllegalStateException("round trip");
        }
        add(c);
    }

    byte[] batches() throws Exception {
        List<Message> list = new ArrayList<>();
        Message a = new Message("TopicTest", "TagA", "k1", utf8("A"));
        MessageAccessor.putProperty(a, "UNIQ_KEY", "C0A8000A1F9018B4AAC2000000000010");
        list.add(a);
        Message b = new Message("TopicTest", utf8("BB"));
        MessageAccessor.putProperty(b, "UNIQ_KEY", "C0A8000A1F9018B4AAC2000000000011");
        b.setFlag(5);
        list.add(b);
        byte[] two = batchCase("batch_two", list, null);

        List<Message> one = new ArrayList<>();
        Message c = new Message("TopicTest", "\u6807\u7b7e", "\u952e1 \u952e2", utf8("\u4e2d\u6587\u6d88\u606f"));
        MessageAccessor.putProperty(c, "UNIQ_KEY", "C0A8000A1F9018B4AAC2000000000012");
        one.add(c);
        batchCase("batch_single_non_ascii", one, null);

        List<Message> empty = new ArrayList<>();
        Message e = new Message("TopicTest", new byte[0]);
        empty.add(e);
        Message f = new Message("TopicTest", new byte[300]);
        f.setFlag(-1);
        empty.add(f);
        batchCase("batch_empty_and_zero_bodies", empty, "empty body; only WAIT property");
        return two;
    }

    byte[] batchCase(String name, List<Message> msgs, String note) throws Exception {
        byte[] body = MessageDecoder.encodeMessages(msgs);
        JSONObject c = newCase(name, "batch");
        if (note != null) {
            c.put("note", note);
        }
        c.put("hex", hex(body));
        JSONArray arr = new JSONArray();
        List<Message> back = MessageDecoder.decodeMessages(ByteBuffer.wrap(body));
        if (back.size() != msgs.size()) {
            throw new IllegalStateException("batch round trip");
        }
        for (Message m : msgs) {
            JSONObject o = obj();
            o.put("flag", m.getFlag());
            o.put("body_hex", hex(m.getBody()));
            o.put("properties", orderedProps(MessageDecoder.messageProperties2String(m.getProperties())));
            arr.add(o);
        }
        c.put("messages", arr);
        add(c);
        return body;
    }

    // ---- ids, crc, tags --------------------------------------------------------------------------

    void ids() throws Exception {
        Object[][] offsetIds = {{"192.168.0.20", 10911, 1234L}, {"127.0.0.1", 10911, 0L},
            {"10.255.0.1", 65535, Long.MAX_VALUE}, {"2001:db8::20", 10911, 1234L}, {"::1", 1, 1L << 40}};
        int i = 0;
        for (Object[] o : offsetIds) {
            InetSocketAddress a = host((String) o[0], (Integer) o[1]);
            String id = MessageDecoder.createMessageId(a, (Long) o[2]);
            MessageId back = MessageDecoder.decodeMessageId(id);
            JSONObject c = newCase("offset_msg_id_" + (i++), "offset_msg_id");
            c.put("host", a.getAddress().getHostAddress());
            c.put("address_hex", hex(a.getAddress().getAddress()));
            c.put("port", a.getPort());
            c.put("offset", o[2]);
            c.put("msg_id", id);
            c.put("decoded_host", ((InetSocketAddress) back.getAddress()).getAddress().getHostAddress());
            c.put("decoded_port", ((InetSocketAddress) back.getAddress()).getPort());
            c.put("decoded_offset", back.getOffset());
            add(c);
        }
        String[] uniq = {"C0A8000A1F9018B4AAC2000000000000", "7F0000013039AABBCCDD0102030400FF",
            "20010DB8000000000000000000000020303918B4AAC200010203FFFF", MessageClientIDSetter.createUniqID()};
        i = 0;
        for (String id : uniq) {
            JSONObject c = newCase("unique_msg_id_" + (i++), "unique_msg_id");
            c.put("msg_id", id);
            c.put("ip", MessageClientIDSetter.getIPStrFromID(id));
            c.put("ip_hex", hex(MessageClientIDSetter.getIPFromID(id)));
            c.put("pid", MessageClientIDSetter.getPidFromID(id));
            byte[] b = UtilAll.string2bytes(id);
            int ipLen = b.length == 28 ? 16 : 4;
            c.put("class_loader_hash", ByteBuffer.wrap(b).getInt(ipLen + 2));
            c.put("ms_since_month_start", ByteBuffer.wrap(b).getInt(ipLen + 6));
            c.put("counter", Short.toUnsignedInt(ByteBuffer.wrap(b).getShort(ipLen + 10)));
            // Java reads its clock inside getNearlyTimeFromID; bracket that instant so the test
            // can replay it (an id made this millisecond sits exactly on the month-choice edge).
            long before = System.currentTimeMillis();
            c.put("nearly_time_ms", MessageClientIDSetter.getNearlyTimeFromID(id).getTime());
            c.put("clock_before_ms", before);
            c.put("clock_after_ms", System.currentTimeMillis());
            add(c);
        }

        String[] crcInputs = {"Hello", "x0", "", "\u4e2d\u6587", "The quick brown fox jumps over the lazy dog"};
        i = 0;
        for (String s : crcInputs) {
            JSONObject c = newCase("crc32_" + (i++), "crc32");
            c.put("input_hex", hex(utf8(s)));
            c.put("crc32", UtilAll.crc32(utf8(s)));
            add(c);
        }
        String[] tags = {"TagA", "TagB", "*", "\u6807\u7b7e", "\ud83d\ude00emoji", "a-very-long-tag-name-that-overflows-int32-many-times", ""};
        i = 0;
        for (String t : tags) {
            JSONObject c = newCase("tags_hash_" + (i++), "tags_hash");
            c.put("tag", t);
            c.put("hash", t.hashCode());
            c.put("tags_code", MessageExtBrokerInner.tagsString2tagsCode(t));
            add(c);
        }
    }

    // ---- ACL ------------------------------------------------------------------------------------

    void aclCase(String name, RemotingCommand cmd, String ak, String sk, String token) throws Exception {
        SessionCredentials cred = token == null ? new SessionCredentials(ak, sk) : new SessionCredentials(ak, sk, token);
        new AclClientRPCHook(cred).doBeforeRequest("127.0.0.1:10911", cmd);
        TreeMap<String, String> sorted = new TreeMap<>(cmd.getExtFields());
        byte[] content = AclUtils.combineRequestContent(cmd, sorted);
        JSONObject c = newCase(name, "acl");
        JSONArray ext = new JSONArray();
        for (Map.Entry<String, String> e : sorted.entrySet()) {
            ext.add(pair(e.getKey(), e.getValue()));
        }
        c.put("ext_fields", ext);
        c.put("body_hex", hex(cmd.getBody()));
        c.put("access_key", ak);
        c.put("secret_key", sk);
        c.put("security_token", token);
        c.put("content_hex", hex(content));
        c.put("signature", cmd.getExtFields().get(SessionCredentials.SIGNATURE));
        // The signed frame as sent (JSON header).
        ByteBuf buf = Unpooled.buffer();
        cmd.fastEncodeHeader(buf);
        if (cmd.getBody() != null) {
            buf.writeBytes(cmd.getBody());
        }
        byte[] wire = new byte[buf.readableBytes()];
        buf.readBytes(wire);
        c.put("frame_hex", hex(wire));
        c.put("code", cmd.getCode());
        c.put("opaque", cmd.getOpaque());
        c.put("wire_ext_fields", wireExtFields(wire, SerializeType.JSON));
        add(c);
    }

    void acls() throws Exception {
        RemotingCommand a = request(RequestCode.PUT_KV_CONFIG, null, 1);
        a.addExtField("bname", "broker-a");
        a.addExtField("queueId", "0");
        a.addExtField("topic", "TopicTest");
        a.setBody(utf8("hello"));
        aclCase("acl_spec_example_body", a, "rocketmq2", "12345678", null);
        RemotingCommand b = request(RequestCode.PUT_KV_CONFIG, null, 2);
        b.addExtField("bname", "broker-a");
        b.addExtField("queueId", "0");
        b.addExtField("topic", "TopicTest");
        aclCase("acl_spec_example_no_body", b, "rocketmq2", "12345678", null);

        SendMessageRequestHeaderV2 h = v2(0, props("WAIT", "true", "UNIQ_KEY", "C0A8000A1F9018B4AAC2000000000001"), false);
        RemotingCommand s = request(RequestCode.SEND_MESSAGE_V2, h, 3);
        s.setBody(utf8("Hello ACL"));
        aclCase("acl_send_v2_header", s, "AK-user", "SK-secret-\u4e2d", null);

        QueryMessageRequestHeader q = new QueryMessageRequestHeader();
        q.setTopic("TopicTest");
        q.setKey("k1");
        q.setMaxNum(32);
        q.setBeginTimestamp(0L);
        q.setEndTimestamp(T0);
        RemotingCommand qm = request(RequestCode.QUERY_MESSAGE, q, 4);
        qm.addExtField("_UNIQUE_KEY_QUERY", "false");
        aclCase("acl_query_message_unique_key", qm, "admin", "adminsecret", null);

        GetRouteInfoRequestHeader g = new GetRouteInfoRequestHeader();
        g.setTopic("TopicTest");
        aclCase("acl_security_token", request(RequestCode.GET_ROUTEINFO_BY_TOPIC, g, 5), "stsAK", "stsSK", "token-123");

        RemotingCommand hb = request(RequestCode.HEART_BEAT, new HeartbeatRequestHeader(), 6);
        hb.setBody(heartbeatBody);
        aclCase("acl_heartbeat_body_only", hb, "rocketmq2", "12345678", null);

        RemotingCommand u = request(RequestCode.PUT_KV_CONFIG, null, 7);
        u.addExtField("Zeta", "z");
        u.addExtField("alpha", "\u00e9\u4e2d");
        u.addExtField("Beta", "");
        u.addExtField("_x", "_");
        aclCase("acl_key_order_case_sensitive", u, "AK", "SK", null);
    }

    // ---- main -----------------------------------------------------------------------------------

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: GoldenVectors <out.json>");
            System.exit(2);
        }
        GoldenVectors g = new GoldenVectors();
        g.bodies();
        byte[] pullBody = g.messages();
        byte[] batchBody = g.batches();
        g.ids();
        g.acls();
        g.frames(g.routeBody, g.heartbeatBody, g.registerBody, pullBody, batchBody, g.lockBody);

        JSONObject root = obj();
        root.put("rocketmq_version", org.apache.rocketmq.common.MQVersion.getVersionDesc(
            org.apache.rocketmq.common.MQVersion.CURRENT_VERSION));
        root.put("java_version", System.getProperty("java.version"));
        root.put("timezone", java.util.TimeZone.getDefault().getID());
        root.put("case_count", g.cases.size());
        root.put("cases", g.cases);
        String out = JSON.toJSONString(root, SerializerFeature.WriteMapNullValue,
            SerializerFeature.DisableCircularReferenceDetect, SerializerFeature.PrettyFormat);
        Files.write(Paths.get(args[0]), out.getBytes(StandardCharsets.UTF_8));
        System.out.println("wrote " + g.cases.size() + " cases to " + args[0]);
    }
}
