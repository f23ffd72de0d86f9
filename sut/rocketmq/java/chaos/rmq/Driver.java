package chaos.rmq;

import com.alibaba.fastjson2.JSON;
import com.alibaba.fastjson2.JSONArray;
import com.alibaba.fastjson2.JSONObject;
import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.PullStatus;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.impl.CommunicationMode;
import org.apache.rocketmq.client.impl.FindBrokerResult;
import org.apache.rocketmq.client.impl.consumer.PullResultExt;
import org.apache.rocketmq.client.impl.factory.MQClientInstance;
import org.apache.rocketmq.client.impl.producer.TopicPublishInfo;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.sysflag.PullSysFlag;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.remoting.protocol.RemotingSerializable;
import org.apache.rocketmq.remoting.protocol.RequestCode;
import org.apache.rocketmq.remoting.protocol.ResponseCode;
import org.apache.rocketmq.remoting.protocol.body.ClusterInfo;
import org.apache.rocketmq.remoting.protocol.body.KVTable;
import org.apache.rocketmq.remoting.protocol.header.PullMessageRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.UpdateConsumerOffsetRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.controller.GetMetaDataResponseHeader;
import org.apache.rocketmq.remoting.protocol.route.BrokerData;
import org.apache.rocketmq.remoting.protocol.route.QueueData;
import org.apache.rocketmq.remoting.protocol.route.TopicRouteData;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * One process that drives RocketMQ's own remoting client for the harness.
 *
 * Requests and answers are JSON lines on stdin / stdout, each carrying the request's "id", so
 * one process serves every worker of a run concurrently (each request runs on a pool thread).
 * A "client" is one producer with its own MQClientInstance (own connections and route table),
 * so a retired worker's new client starts from fresh connections as Jepsen's rules want.
 * The driver reports what RocketMQ said (send status, exception class, broker response code);
 * classifying it into ok / fail / info is the Python side's (sut/rocketmq/driver.py).
 * End of stdin ends the process, so it never outlives the harness that started it.
 */
public final class Driver {
    private static final PrintStream OUT = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
    private static final String SUB_ALL = "*";

    private final Map<Integer, Client> clients = new ConcurrentHashMap<>();
    private final Map<Integer, GroupMember> members = new ConcurrentHashMap<>();
    private final Map<Integer, OrderedMember> orderedMembers = new ConcurrentHashMap<>();
    private final Map<Integer, TxProducer> txProducers = new ConcurrentHashMap<>();
    // Check-backs answered by any transactional producer, until the harness takes them.
    private final List<JSONObject> txChecks = new ArrayList<>();
    private final Map<String, DefaultMQAdminExt> admins = new ConcurrentHashMap<>();
    private final AtomicInteger nextClient = new AtomicInteger();
    private final ExecutorService pool = Executors.newCachedThreadPool(r -> {
        Thread t = new Thread(r, "driver-request");
        t.setDaemon(true);
        return t;
    });

    /** A producer (and its MQClientInstance, used for pulls and commits too). */
    private static final class Client {
        final DefaultMQProducer producer;
        final Map<String, List<MessageQueue>> queues = new ConcurrentHashMap<>();

        Client(DefaultMQProducer producer) {
            this.producer = producer;
        }

        MQClientInstance instance() {
            return producer.getDefaultMQProducerImpl().getMqClientFactory();
        }
    }

    /** An answer the request itself spells out as an error (bad request, unknown client). */
    static final class RequestError extends Exception {
        RequestError(String message) {
            super(message);
        }
    }

    public static void main(String[] args) throws Exception {
        // The client libraries may print; only answers go to the real stdout.
        System.setOut(System.err);
        Driver driver = new Driver();
        JSONObject ready = new JSONObject();
        ready.put("ready", true);
        ready.put("pid", ProcessHandle.current().pid());
        emit(ready);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            JSONObject request;
            try {
                request = JSON.parseObject(line);
            } catch (RuntimeException e) {
                JSONObject answer = new JSONObject();
                answer.put("id", null);
                answer.put("ok", false);
                answer.put("error", error(new RequestError("not a JSON object: " + e.getMessage())));
                emit(answer);
                continue;
            }
            driver.pool.execute(() -> driver.serve(request));
        }
        driver.shutdown();
        Runtime.getRuntime().halt(0);
    }

    private static void emit(JSONObject answer) {
        String text = answer.toJSONString();
        synchronized (OUT) {
            OUT.println(text);
            OUT.flush();
        }
    }

    private void serve(JSONObject request) {
        JSONObject answer = new JSONObject();
        answer.put("id", request.get("id"));
        try {
            answer.put("result", dispatch(request));
            answer.put("ok", true);
        } catch (Throwable e) {
            answer.put("ok", false);
            answer.put("error", error(e));
        }
        emit(answer);
    }

    /** What went wrong, as the Python side classifies it: exception class, response code, cause. */
    private static JSONObject error(Throwable e) {
        JSONObject err = new JSONObject();
        err.put("class", e.getClass().getSimpleName());
        err.put("message", String.valueOf(e.getMessage()));
        if (e instanceof MQBrokerException) {
            err.put("code", ((MQBrokerException) e).getResponseCode());
            err.put("broker", ((MQBrokerException) e).getBrokerAddr());
        } else if (e instanceof MQClientException) {
            err.put("code", ((MQClientException) e).getResponseCode());
        }
        Throwable cause = e.getCause();
        if (cause != null && cause != e) {
            err.put("cause", cause.getClass().getSimpleName());
        }
        return err;
    }

    private Object dispatch(JSONObject r) throws Exception {
        String op = r.getString("op");
        if (op == null) {
            throw new RequestError("request without an op");
        }
        switch (op) {
            case "open": return open(r);
            case "close": return close(r);
            case "queues": return queuesOf(client(r), r.getString("topic"), r.getBooleanValue("refresh"));
            case "send": return send(r);
            case "pull": return pull(r);
            case "commit": return commit(r);
            case "create_topic": return createTopic(r);
            case "topic_route": return topicRoute(r);
            case "cluster": return cluster(r);
            case "controller_meta": return controllerMeta(r);
            case "sync_state": return syncState(r);
            case "broker_stats": return brokerStats(r);
            case "group_open": return groupOpen(r);
            case "group_rebalance": return member(r).rebalance();
            case "group_committed": return member(r).committed(r.getIntValue("queue"));
            case "group_pull": return member(r).pull(r.getIntValue("queue"), r.getLongValue("offset"),
                                                   r.getIntValue("max", 32), r.getLongValue("timeout_ms", 3000));
            case "group_commit": member(r).commit(r.getIntValue("queue"), r.getLongValue("offset")); return true;
            case "group_close": return groupClose(r);
            case "ordered_open": return orderedOpen(r);
            case "ordered_take": return orderedMember(r).take();
            case "ordered_close": return orderedClose(r);
            case "tx_open": return txOpen(r);
            case "tx_send": return txProducer(r).send(r.getString("topic"), Base64.getDecoder().decode(r.getString("body")),
                                                      r.getString("key"), r.getString("decision"),
                                                      r.getString("resolution"));
            case "tx_checks": return TxProducer.take(txChecks);
            case "tx_close": return txClose(r);
            case "ping": return "pong";
            default: throw new RequestError("unknown op " + op);
        }
    }

    // -- clients -----------------------------------------------------------------------

    private Object open(JSONObject r) throws MQClientException {
        int id = nextClient.incrementAndGet();
        String tag = "chaos-" + ProcessHandle.current().pid() + "-" + id;
        DefaultMQProducer producer = new DefaultMQProducer(tag);
        producer.setInstanceName(tag);
        producer.setNamesrvAddr(r.getString("namesrv"));
        producer.setPollNameServerInterval(r.getIntValue("route_refresh_ms", 30000));
        producer.setHeartbeatBrokerInterval(r.getIntValue("heartbeat_ms", 30000));
        producer.setSendMsgTimeout(r.getIntValue("timeout_ms", 3000));
        producer.setMqClientApiTimeout(r.getIntValue("timeout_ms", 3000));
        producer.setRetryTimesWhenSendFailed(0);
        producer.setSendLatencyFaultEnable(false);
        producer.setVipChannelEnabled(false);
        producer.start();
        clients.put(id, new Client(producer));
        JSONObject result = new JSONObject();
        result.put("client", id);
        result.put("instance", tag);
        return result;
    }

    private Object close(JSONObject r) {
        Client c = clients.remove(r.getIntValue("client"));
        if (c != null) {
            c.producer.shutdown();
        }
        return c != null;
    }

    private Client client(JSONObject r) throws RequestError {
        Client c = clients.get(r.getIntValue("client"));
        if (c == null) {
            throw new RequestError("no open client " + r.get("client"));
        }
        return c;
    }

    /**
     * The topic's message queues in a fixed order (broker name, queue id): queue i of the
     * workload is the i-th. Registered in the producer's publish table, so the client
     * instance refreshes the topic's route every pollNameServerInterval as any producer does.
     */
    private List<MessageQueue> queuesOf(Client c, String topic, boolean refresh) throws RequestError {
        List<MessageQueue> known = c.queues.get(topic);
        if (known != null && !refresh) {
            return known;
        }
        c.producer.getDefaultMQProducerImpl().getTopicPublishInfoTable().putIfAbsent(topic, new TopicPublishInfo());
        c.instance().updateTopicRouteInfoFromNameServer(topic);
        TopicRouteData route = c.instance().getTopicRouteTable().get(topic);
        if (route == null || route.getQueueDatas() == null || route.getQueueDatas().isEmpty()) {
            throw new RequestError("no route for topic " + topic);
        }
        List<MessageQueue> queues = ordered(topic, route.getQueueDatas());
        c.queues.put(topic, queues);
        return queues;
    }

    /** A route's queues in the workloads' order: queue i is the i-th by (broker name, queue id). */
    static List<MessageQueue> ordered(String topic, List<QueueData> queueDatas) {
        List<QueueData> datas = new ArrayList<>(queueDatas);
        datas.sort(Comparator.comparing(QueueData::getBrokerName));
        List<MessageQueue> queues = new ArrayList<>();
        for (QueueData qd : datas) {
            for (int i = 0; i < qd.getWriteQueueNums(); i++) {
                queues.add(new MessageQueue(topic, qd.getBrokerName(), i));
            }
        }
        return queues;
    }

    // -- consumer group members ----------------------------------------------------------

    private Object groupOpen(JSONObject r) throws MQClientException {
        int id = nextClient.incrementAndGet();
        String tag = "chaos-" + ProcessHandle.current().pid() + "-m" + id;
        GroupMember member = new GroupMember(r.getString("namesrv"), r.getString("group"), r.getString("topic"), tag,
                                             r.getIntValue("timeout_ms", 3000), r.getIntValue("route_refresh_ms", 30000));
        members.put(id, member);
        JSONObject result = new JSONObject();
        result.put("member", id);
        result.put("client_id", member.clientId());
        return result;
    }

    private Object groupClose(JSONObject r) {
        GroupMember m = members.remove(r.getIntValue("member"));
        if (m != null) {
            m.close();
        }
        return m != null;
    }

    private GroupMember member(JSONObject r) throws RequestError {
        GroupMember m = members.get(r.getIntValue("member"));
        if (m == null) {
            throw new RequestError("no open group member " + r.get("member"));
        }
        return m;
    }

    // -- orderly consumers and transactional producers --------------------------------------

    private String tag(String kind, int id) {
        return "chaos-" + ProcessHandle.current().pid() + "-" + kind + id;
    }

    private Object orderedOpen(JSONObject r) throws MQClientException {
        int id = nextClient.incrementAndGet();
        OrderedMember member = new OrderedMember(r.getString("namesrv"), r.getString("group"), r.getString("topic"),
                                                 tag("o", id), r.getIntValue("timeout_ms", 3000),
                                                 r.getIntValue("route_refresh_ms", 30000), r.getLongValue("process_ms", 5));
        orderedMembers.put(id, member);
        JSONObject result = new JSONObject();
        result.put("member", id);
        result.put("client_id", member.clientId());
        return result;
    }

    private OrderedMember orderedMember(JSONObject r) throws RequestError {
        OrderedMember m = orderedMembers.get(r.getIntValue("member"));
        if (m == null) {
            throw new RequestError("no open orderly consumer " + r.get("member"));
        }
        return m;
    }

    private Object orderedClose(JSONObject r) {
        OrderedMember m = orderedMembers.remove(r.getIntValue("member"));
        return m == null ? null : m.close();
    }

    private Object txOpen(JSONObject r) throws MQClientException {
        int id = nextClient.incrementAndGet();
        TxProducer producer = new TxProducer(r.getString("namesrv"), r.getString("group"), tag("t", id),
                                             r.getIntValue("timeout_ms", 3000), r.getIntValue("route_refresh_ms", 30000),
                                             txChecks);
        txProducers.put(id, producer);
        JSONObject result = new JSONObject();
        result.put("client", id);
        return result;
    }

    private TxProducer txProducer(JSONObject r) throws RequestError {
        TxProducer p = txProducers.get(r.getIntValue("client"));
        if (p == null) {
            throw new RequestError("no open transactional producer " + r.get("client"));
        }
        return p;
    }

    private Object txClose(JSONObject r) {
        TxProducer p = txProducers.remove(r.getIntValue("client"));
        if (p != null) {
            p.close();
        }
        return p != null;
    }

    private MessageQueue queue(Client c, String topic, int index) throws RequestError {
        List<MessageQueue> queues = queuesOf(c, topic, false);
        if (index >= queues.size()) {
            queues = queuesOf(c, topic, true);
        }
        if (index < 0 || index >= queues.size()) {
            throw new RequestError("topic " + topic + " has no queue " + index + " (" + queues.size() + " queues)");
        }
        return queues.get(index);
    }

    private Object send(JSONObject r) throws Exception {
        Client c = client(r);
        String topic = r.getString("topic");
        MessageQueue mq = queue(c, topic, r.getIntValue("queue"));
        Message msg = new Message(topic, Base64.getDecoder().decode(r.getString("body")));
        String key = r.getString("key");
        if (key != null) {
            msg.setKeys(key);
        }
        long deliverMs = r.getLongValue("deliver_ms", 0L);
        if (deliverMs > 0) {
            // A timer message (RocketMQ 5's timer wheel, timerWheelEnable on the broker).
            msg.setDeliverTimeMs(deliverMs);
        }
        // Where the client sends: the master of its current route (reported as the node).
        String addr = c.instance().findBrokerAddressInPublish(mq.getBrokerName());
        SendResult sent = c.producer.send(msg, mq, r.getLongValue("timeout_ms", 3000));
        JSONObject result = new JSONObject();
        result.put("status", sent.getSendStatus().name());
        result.put("msg_id", sent.getMsgId());
        result.put("offset_msg_id", sent.getOffsetMsgId());
        result.put("broker_name", sent.getMessageQueue().getBrokerName());
        result.put("queue_id", sent.getMessageQueue().getQueueId());
        result.put("queue_offset", sent.getQueueOffset());
        result.put("broker_addr", addr);
        return result;
    }

    /**
     * Pull by queue and offset from the master of the current route, or from a replica when
     * the route names no master: what a RocketMQ consumer does. The answer says which broker
     * answered and whether the route named it master, as the workloads' audit needs.
     */
    private Object pull(JSONObject r) throws Exception {
        Client c = client(r);
        String topic = r.getString("topic");
        MessageQueue mq = queue(c, topic, r.getIntValue("queue"));
        FindBrokerResult found = c.instance().findBrokerAddressInSubscribe(mq.getBrokerName(), MixAll.MASTER_ID, false);
        if (found == null) {
            throw new RequestError("no broker in the route of " + mq.getBrokerName());
        }
        PullMessageRequestHeader h = new PullMessageRequestHeader();
        h.setConsumerGroup(r.getString("group"));
        h.setTopic(topic);
        h.setQueueId(mq.getQueueId());
        h.setQueueOffset(r.getLongValue("offset"));
        h.setMaxMsgNums(r.getIntValue("max", 32));
        h.setSysFlag(PullSysFlag.buildSysFlag(false, false, true, false));
        h.setCommitOffset(0L);
        h.setSuspendTimeoutMillis(0L);
        h.setSubscription(SUB_ALL);
        h.setSubVersion(0L);
        h.setExpressionType("TAG");
        h.setBrokerName(mq.getBrokerName());
        long timeout = r.getLongValue("timeout_ms", 3000);
        PullResult pulled = c.instance().getMQClientAPIImpl().pullMessage(
            found.getBrokerAddr(), h, timeout, CommunicationMode.SYNC, null);
        JSONObject result = new JSONObject();
        result.put("status", pulled.getPullStatus().name());
        result.put("next_offset", pulled.getNextBeginOffset());
        result.put("min_offset", pulled.getMinOffset());
        result.put("max_offset", pulled.getMaxOffset());
        result.put("broker_addr", found.getBrokerAddr());
        boolean fromMaster = !found.isSlave();
        if (fromMaster && pulled.getPullStatus() != PullStatus.FOUND) {
            // "Nothing there" speaks for the log only if the broker still is the master: the
            // route may be older than a failover. Messages need no check: they are data.
            fromMaster = stillMaster(c, found.getBrokerAddr(), timeout);
        }
        result.put("from_master", fromMaster);
        JSONArray messages = new JSONArray();
        if (pulled.getPullStatus() == PullStatus.FOUND) {
            byte[] binary = ((PullResultExt) pulled).getMessageBinary();
            for (MessageExt m : MessageDecoder.decodesBatch(ByteBuffer.wrap(binary), true, true, true)) {
                JSONObject item = new JSONObject();
                item.put("offset", m.getQueueOffset());
                item.put("body", Base64.getEncoder().encodeToString(m.getBody()));
                item.put("msg_id", m.getMsgId());
                item.put("keys", m.getKeys());
                item.put("store_ms", m.getStoreTimestamp());
                item.put("born_ms", m.getBornTimestamp());
                messages.add(item);
            }
        }
        result.put("messages", messages);
        return result;
    }

    /** The broker's own role (brokerRole changes with every DLedger or controller switch). */
    private static boolean stillMaster(Client c, String addr, long timeout) {
        try {
            String role = c.instance().getMQClientAPIImpl().getBrokerConfig(addr, timeout).getProperty("brokerRole");
            return role != null && !"SLAVE".equals(role);
        } catch (Exception e) {
            return false;   // unknown: not authoritative
        }
    }

    private Object commit(JSONObject r) throws Exception {
        Client c = client(r);
        MessageQueue mq = queue(c, r.getString("topic"), r.getIntValue("queue"));
        String addr = c.instance().findBrokerAddressInPublish(mq.getBrokerName());
        if (addr == null) {
            throw new RequestError("no master in the route of " + mq.getBrokerName());
        }
        UpdateConsumerOffsetRequestHeader h = new UpdateConsumerOffsetRequestHeader();
        h.setConsumerGroup(r.getString("group"));
        h.setTopic(mq.getTopic());
        h.setQueueId(mq.getQueueId());
        h.setCommitOffset(r.getLongValue("offset"));
        h.setBrokerName(mq.getBrokerName());
        c.instance().getMQClientAPIImpl().updateConsumerOffset(addr, h, r.getLongValue("timeout_ms", 3000));
        return addr;
    }

    // -- admin -------------------------------------------------------------------------

    private DefaultMQAdminExt admin(JSONObject r) throws MQClientException {
        String namesrv = r.getString("namesrv");
        long timeout = r.getLongValue("timeout_ms", 5000);
        String key = namesrv + "|" + timeout;
        DefaultMQAdminExt existing = admins.get(key);
        if (existing != null) {
            return existing;
        }
        synchronized (admins) {
            existing = admins.get(key);
            if (existing != null) {
                return existing;
            }
            DefaultMQAdminExt admin = new DefaultMQAdminExt(timeout);
            admin.setInstanceName("chaos-admin-" + ProcessHandle.current().pid() + "-" + admins.size());
            admin.setNamesrvAddr(namesrv);
            admin.setVipChannelEnabled(false);
            admin.start();
            admins.put(key, admin);
            return admin;
        }
    }

    /** Create (or update) the topic on every broker the cluster info names, masters and slaves. */
    private Object createTopic(JSONObject r) throws Exception {
        DefaultMQAdminExt admin = admin(r);
        int queues = r.getIntValue("queues");
        TopicConfig config = new TopicConfig(r.getString("topic"), queues, queues, 6);
        JSONObject done = new JSONObject();
        JSONObject failed = new JSONObject();
        for (BrokerData bd : admin.examineBrokerClusterInfo().getBrokerAddrTable().values()) {
            for (Map.Entry<Long, String> e : bd.getBrokerAddrs().entrySet()) {
                try {
                    admin.createAndUpdateTopicConfig(e.getValue(), config);
                    done.put(e.getValue(), e.getKey());
                } catch (Exception ex) {
                    failed.put(e.getValue(), error(ex));
                }
            }
        }
        JSONObject result = new JSONObject();
        result.put("created", done);
        result.put("failed", failed);
        return result;
    }

    private Object topicRoute(JSONObject r) throws Exception {
        TopicRouteData route = admin(r).examineTopicRouteInfo(r.getString("topic"));
        JSONObject queues = new JSONObject();
        for (QueueData qd : route.getQueueDatas()) {
            JSONObject q = new JSONObject();
            q.put("read", qd.getReadQueueNums());
            q.put("write", qd.getWriteQueueNums());
            q.put("perm", qd.getPerm());
            queues.put(qd.getBrokerName(), q);
        }
        JSONObject result = new JSONObject();
        result.put("queues", queues);
        result.put("brokers", brokers(route.getBrokerDatas()));
        return result;
    }

    /** brokerName -> {brokerId: address}; brokerId 0 is the master (the DLedger leader). */
    private static JSONObject brokers(Iterable<BrokerData> datas) {
        JSONObject out = new JSONObject();
        for (BrokerData bd : datas) {
            JSONObject ids = new JSONObject();
            for (Map.Entry<Long, String> e : new TreeMap<>(bd.getBrokerAddrs()).entrySet()) {
                ids.put(String.valueOf(e.getKey()), e.getValue());
            }
            out.put(bd.getBrokerName(), ids);
        }
        return out;
    }

    private Object cluster(JSONObject r) throws Exception {
        ClusterInfo info = admin(r).examineBrokerClusterInfo();
        JSONObject clusters = new JSONObject();
        for (Map.Entry<String, java.util.Set<String>> e : info.getClusterAddrTable().entrySet()) {
            List<String> names = new ArrayList<>(e.getValue());
            names.sort(null);
            clusters.put(e.getKey(), names);
        }
        JSONObject result = new JSONObject();
        result.put("clusters", clusters);
        result.put("brokers", brokers(info.getBrokerAddrTable().values()));
        return result;
    }

    private Object controllerMeta(JSONObject r) throws Exception {
        GetMetaDataResponseHeader meta = admin(r).getControllerMetaData(r.getString("controller"));
        JSONObject result = new JSONObject();
        result.put("group", meta.getGroup());
        result.put("leader_id", meta.getControllerLeaderId());
        result.put("leader_addr", meta.getControllerLeaderAddress());
        result.put("is_leader", meta.isLeader());
        result.put("peers", meta.getPeers());
        return result;
    }

    /** The controller's view of each broker group: master, epochs, SyncStateSet.
     *  Asked and read as plain JSON rather than through BrokerReplicasInfo: releases before
     *  persistent broker ids (5.1.0) name a replica's address `address` (later `brokerAddress`)
     *  and report neither `masterBrokerId` nor `alive`, which the typed decoding drops. */
    private Object syncState(JSONObject r) throws Exception {
        List<String> names = r.getJSONArray("brokers").toJavaList(String.class);
        DefaultMQAdminExt admin = admin(r);
        GetMetaDataResponseHeader meta = admin.getControllerMetaData(r.getString("controller"));
        RemotingCommand request = RemotingCommand.createRequestCommand(RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, null);
        request.setBody(RemotingSerializable.encode(names));
        RemotingCommand response = admin.getDefaultMQAdminExtImpl().getMqClientInstance().getMQClientAPIImpl()
            .getRemotingClient().invokeSync(meta.getControllerLeaderAddress(), request, r.getIntValue("timeout_ms", 3000));
        if (response.getCode() != ResponseCode.SUCCESS) {
            throw new MQBrokerException(response.getCode(), response.getRemark());
        }
        JSONObject table = JSON.parseObject(new String(response.getBody(), StandardCharsets.UTF_8))
            .getJSONObject("replicasInfoTable");
        JSONObject result = new JSONObject();
        for (String name : table == null ? List.<String>of() : new ArrayList<>(table.keySet())) {
            JSONObject ri = table.getJSONObject(name);
            JSONObject g = new JSONObject();
            g.put("master_id", ri.get("masterBrokerId"));
            g.put("master_addr", ri.getString("masterAddress"));
            g.put("master_epoch", ri.getIntValue("masterEpoch"));
            g.put("sync_state_set_epoch", ri.getIntValue("syncStateSetEpoch"));
            g.put("in_sync", replicas(ri.getJSONArray("inSyncReplicas")));
            g.put("not_in_sync", replicas(ri.getJSONArray("notInSyncReplicas")));
            result.put(name, g);
        }
        return result;
    }

    private static JSONArray replicas(JSONArray list) {
        JSONArray out = new JSONArray();
        for (int i = 0; list != null && i < list.size(); i++) {
            JSONObject id = list.getJSONObject(i);
            JSONObject o = new JSONObject();
            o.put("id", id.get("brokerId"));
            o.put("addr", id.containsKey("brokerAddress") ? id.getString("brokerAddress") : id.getString("address"));
            o.put("alive", id.get("alive"));   // null before 5.1.1: not reported
            out.add(o);
        }
        return out;
    }

    private Object brokerStats(JSONObject r) throws Exception {
        KVTable table = admin(r).fetchBrokerRuntimeStats(r.getString("broker"));
        return new JSONObject(new TreeMap<>(table.getTable()));
    }

    private void shutdown() {
        Thread closer = new Thread(() -> {
            clients.values().forEach(c -> c.producer.shutdown());
            members.values().forEach(GroupMember::close);
            orderedMembers.values().forEach(OrderedMember::close);
            txProducers.values().forEach(TxProducer::close);
            admins.values().forEach(DefaultMQAdminExt::shutdown);
        });
        closer.setDaemon(true);
        closer.start();
        try {
            closer.join(2000);
        } catch (InterruptedException ignored) {
            Thread.currentThread().interrupt();
        }
    }
}
