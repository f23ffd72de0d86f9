package chaos.rmq;

import com.alibaba.fastjson2.JSONArray;
import com.alibaba.fastjson2.JSONObject;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Comparator;
import java.util.List;
import org.apache.rocketmq.client.consumer.AllocateMessageQueueStrategy;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.PullStatus;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.consumer.store.OffsetStore;
import org.apache.rocketmq.client.consumer.store.ReadOffsetType;
import org.apache.rocketmq.client.consumer.store.RemoteBrokerOffsetStore;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.impl.FindBrokerResult;
import org.apache.rocketmq.client.impl.factory.MQClientInstance;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.protocol.heartbeat.MessageModel;
import org.apache.rocketmq.remoting.protocol.route.TopicRouteData;

/**
 * One member of a consumer group (clustering mode) on RocketMQ's own pull consumer: its
 * RebalanceService and averaging allocation decide which queues it holds, its
 * RemoteBrokerOffsetStore reads and commits the group's offsets on the brokers, and its pull
 * path picks the broker (master, or the replica the master suggests). The driver only
 * records what the rebalance decided (members seen, queues allocated) so the history can say
 * who held which queue when.
 */
final class GroupMember {
    private final DefaultMQPullConsumer consumer;
    private final String topic;
    private volatile List<String> members = List.of();
    private volatile List<MessageQueue> held = List.of();
    private volatile long rebalances;

    /** RocketMQ's averaging allocation, remembering the member list and result it last used. */
    private final class Recording implements AllocateMessageQueueStrategy {
        private final AllocateMessageQueueStrategy inner = new AllocateMessageQueueAveragely();

        @Override
        public List<MessageQueue> allocate(String group, String me, List<MessageQueue> all, List<String> cids) {
            List<MessageQueue> mine = inner.allocate(group, me, all, cids);
            members = new ArrayList<>(cids);
            held = new ArrayList<>(mine);
            rebalances++;
            return mine;
        }

        @Override
        public String getName() {
            return inner.getName();
        }
    }

    GroupMember(String namesrv, String group, String topic, String instance, int timeoutMs, int routeRefreshMs)
            throws MQClientException {
        this.topic = topic;
        consumer = new DefaultMQPullConsumer(group);
        consumer.setInstanceName(instance);
        consumer.setNamesrvAddr(namesrv);
        consumer.setMessageModel(MessageModel.CLUSTERING);
        consumer.setAllocateMessageQueueStrategy(new Recording());
        consumer.setPollNameServerInterval(routeRefreshMs);
        consumer.setConsumerPullTimeoutMillis(timeoutMs);
        consumer.setMqClientApiTimeout(timeoutMs);
        consumer.setVipChannelEnabled(false);
        consumer.registerMessageQueueListener(topic, (t, all, mine) -> { });
        consumer.start();
    }

    String clientId() {
        return instance().getClientId();
    }

    private MQClientInstance instance() {
        return consumer.getDefaultMQPullConsumerImpl().getRebalanceImpl().getmQClientFactory();
    }

    private OffsetStore offsets() {
        return consumer.getDefaultMQPullConsumerImpl().getOffsetStore();
    }

    /** The topic's queues in the workload's order (broker name, queue id), from this member's route. */
    List<MessageQueue> queues() throws Driver.RequestError {
        TopicRouteData route = instance().getTopicRouteTable().get(topic);
        if (route == null || route.getQueueDatas() == null || route.getQueueDatas().isEmpty()) {
            instance().updateTopicRouteInfoFromNameServer(topic);
            route = instance().getTopicRouteTable().get(topic);
        }
        if (route == null || route.getQueueDatas() == null || route.getQueueDatas().isEmpty()) {
            throw new Driver.RequestError("no route for topic " + topic);
        }
        return Driver.ordered(topic, route.getQueueDatas());
    }

    private MessageQueue queue(int index) throws Driver.RequestError {
        List<MessageQueue> all = queues();
        if (index < 0 || index >= all.size()) {
            throw new Driver.RequestError("topic " + topic + " has no queue " + index + " (" + all.size() + " queues)");
        }
        return all.get(index);
    }

    /** Heartbeat, rebalance now (what RebalanceService does on its interval or a member-change
     *  notice), and say what the rebalance decided. */
    JSONObject rebalance() throws Driver.RequestError {
        instance().sendHeartbeatToAllBrokerWithLock();
        long before = rebalances;
        consumer.getDefaultMQPullConsumerImpl().doRebalance();
        JSONObject out = new JSONObject();
        out.put("rebalanced", rebalances != before);
        out.put("members", new JSONArray(members));
        List<MessageQueue> all = queues();
        JSONArray mine = new JSONArray();
        for (MessageQueue mq : held) {
            int i = all.indexOf(mq);
            if (i >= 0) {
                mine.add(i);
            }
        }
        mine.sort(Comparator.comparingInt(o -> (Integer) o));
        out.put("held", mine);
        out.put("queues", all.size());
        return out;
    }

    /** The group's committed offset of a queue as the broker has it (-1: none committed). */
    long committed(int index) throws Driver.RequestError {
        MessageQueue mq = queue(index);
        long offset = offsets().readOffset(mq, ReadOffsetType.READ_FROM_STORE);
        if (offset < -1) {
            throw new Driver.RequestError("the offset store could not read the offset of " + mq + " from the broker");
        }
        return offset;
    }

    JSONObject pull(int index, long offset, int max, long timeoutMs) throws Exception {
        MessageQueue mq = queue(index);
        FindBrokerResult master = instance().findBrokerAddressInSubscribe(mq.getBrokerName(), MixAll.MASTER_ID, true);
        PullResult pulled = consumer.pull(mq, "*", offset, max, timeoutMs);
        JSONObject result = new JSONObject();
        result.put("status", pulled.getPullStatus().name());
        result.put("next_offset", pulled.getNextBeginOffset());
        result.put("min_offset", pulled.getMinOffset());
        result.put("max_offset", pulled.getMaxOffset());
        result.put("broker_addr", master == null ? null : master.getBrokerAddr());
        JSONArray messages = new JSONArray();
        if (pulled.getPullStatus() == PullStatus.FOUND && pulled.getMsgFoundList() != null) {
            for (MessageExt m : pulled.getMsgFoundList()) {
                JSONObject item = new JSONObject();
                item.put("offset", m.getQueueOffset());
                item.put("body", Base64.getEncoder().encodeToString(m.getBody()));
                item.put("msg_id", m.getMsgId());
                messages.add(item);
            }
        }
        result.put("messages", messages);
        return result;
    }

    /** Commit through the offset store: its table (which RocketMQ persists on its own interval,
     *  on rebalance and on shutdown) and at once to the broker, waiting for the answer. */
    void commit(int index, long offset) throws Exception {
        MessageQueue mq = queue(index);
        OffsetStore store = offsets();
        store.updateOffset(mq, offset, false);
        ((RemoteBrokerOffsetStore) store).updateConsumeOffsetToBroker(mq, offset, false);
    }

    /** Shut down: RocketMQ persists the offsets its store holds (the ones committed) and
     *  unregisters from every broker, which tells the other members to rebalance. */
    void close() {
        consumer.shutdown();
    }
}
