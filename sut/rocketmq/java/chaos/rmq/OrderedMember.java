package chaos.rmq;

import com.alibaba.fastjson2.JSONArray;
import com.alibaba.fastjson2.JSONObject;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.impl.consumer.ProcessQueue;
import org.apache.rocketmq.client.impl.factory.MQClientInstance;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.protocol.heartbeat.MessageModel;
import org.apache.rocketmq.remoting.protocol.route.TopicRouteData;

/**
 * One member of an orderly consumer group on RocketMQ's own push consumer with a
 * MessageListenerOrderly: its rebalance locks each queue it is given on the broker
 * (lockBatchMQ) before it consumes it, renews the locks on its interval, consumes one queue on
 * one thread at a time and commits offsets through its own offset store. The listener only
 * records what it was given and when it processed it (System.nanoTime, one clock for every
 * member in this JVM), so the checker can see two members processing one queue at once.
 */
final class OrderedMember {
    private final DefaultMQPushConsumer consumer;
    private final String topic;
    private final List<JSONObject> deliveries = new ArrayList<>();

    OrderedMember(String namesrv, String group, String topic, String instance, int timeoutMs, int routeRefreshMs,
                  long processMs) throws MQClientException {
        this.topic = topic;
        consumer = new DefaultMQPushConsumer(group);
        consumer.setInstanceName(instance);
        consumer.setNamesrvAddr(namesrv);
        consumer.setMessageModel(MessageModel.CLUSTERING);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setPollNameServerInterval(routeRefreshMs);
        consumer.setMqClientApiTimeout(timeoutMs);
        consumer.setVipChannelEnabled(false);
        // A small JVM serves every member: a few consume threads are enough for a few queues.
        consumer.setConsumeThreadMin(2);
        consumer.setConsumeThreadMax(2);
        consumer.setPullBatchSize(8);
        consumer.setPersistConsumerOffsetInterval(1000);
        // Shutdown waits for the message in hand before it unlocks the queues.
        consumer.setAwaitTerminationMillisWhenShutdown(5000);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerOrderly) (msgs, context) -> {
            long start = System.nanoTime();
            if (processMs > 0) {
                try {
                    Thread.sleep(processMs);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT;
                }
            }
            long end = System.nanoTime();
            record(context.getMessageQueue(), msgs, start, end);
            return ConsumeOrderlyStatus.SUCCESS;
        });
        consumer.start();
    }

    String clientId() {
        return consumer.buildMQClientId();
    }

    private MQClientInstance instance() {
        return consumer.getDefaultMQPushConsumerImpl().getRebalanceImpl().getmQClientFactory();
    }

    /** The workloads' index of a queue (broker name, then queue id), -1 if the route lacks it. */
    private int indexOf(MessageQueue mq) {
        TopicRouteData route = instance().getTopicRouteTable().get(topic);
        if (route == null || route.getQueueDatas() == null) {
            return -1;
        }
        return Driver.ordered(topic, route.getQueueDatas()).indexOf(mq);
    }

    private void record(MessageQueue mq, List<MessageExt> msgs, long start, long end) {
        int queue = indexOf(mq);
        String client = clientId();
        synchronized (deliveries) {
            for (MessageExt m : msgs) {
                JSONObject item = new JSONObject();
                item.put("client", client);
                item.put("queue", queue);
                item.put("broker_name", mq.getBrokerName());
                item.put("offset", m.getQueueOffset());
                item.put("msg_id", m.getMsgId());
                item.put("body", Base64.getEncoder().encodeToString(m.getBody()));
                item.put("reconsume", m.getReconsumeTimes());
                item.put("start_ns", start);
                item.put("end_ns", end);
                deliveries.add(item);
            }
        }
    }

    /** What the listener processed since the last take, and the queues this member holds
     *  locked now (as its ProcessQueues say: locked and the lock not expired). */
    JSONObject take() {
        JSONObject out = new JSONObject();
        JSONArray items;
        synchronized (deliveries) {
            items = new JSONArray(deliveries);
            deliveries.clear();
        }
        out.put("deliveries", items);
        JSONArray locked = new JSONArray();
        Map<MessageQueue, ProcessQueue> table = consumer.getDefaultMQPushConsumerImpl().getRebalanceImpl()
            .getProcessQueueTable();
        for (Map.Entry<MessageQueue, ProcessQueue> e : table.entrySet()) {
            ProcessQueue pq = e.getValue();
            if (topic.equals(e.getKey().getTopic()) && pq.isLocked() && !pq.isLockExpired() && !pq.isDropped()) {
                locked.add(indexOf(e.getKey()));
            }
        }
        locked.sort(null);
        out.put("locked", locked);
        out.put("now_ns", System.nanoTime());
        return out;
    }

    /** Shut down (RocketMQ persists its offsets, unlocks its queues and unregisters), and
     *  hand over what was processed since the last take. */
    JSONObject close() {
        consumer.shutdown();
        return take();
    }
}
