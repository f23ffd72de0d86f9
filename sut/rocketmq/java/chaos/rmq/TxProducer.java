package chaos.rmq;

import com.alibaba.fastjson2.JSONArray;
import com.alibaba.fastjson2.JSONObject;
import java.util.ArrayList;
import java.util.List;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * A transactional producer (RocketMQ's TransactionMQProducer): it sends a half message, runs
 * the "local transaction" (whose answer the workload chose: commit, rollback or unknown) and
 * ends the transaction with that answer; for an unknown one the broker's check service asks a
 * producer of the same group later (check-back), and the listener answers the resolution the
 * workload also chose, carried in the message's user property. Every check-back is recorded:
 * the harness takes them into the history.
 */
final class TxProducer {
    static final String DECISION = "chaos-tx-decision";
    static final String RESOLUTION = "chaos-tx-resolve";

    private final TransactionMQProducer producer;
    private final List<JSONObject> checks;

    TxProducer(String namesrv, String group, String instance, int timeoutMs, int routeRefreshMs,
               List<JSONObject> checks) throws MQClientException {
        this.checks = checks;
        producer = new TransactionMQProducer(group);
        producer.setInstanceName(instance);
        producer.setNamesrvAddr(namesrv);
        producer.setPollNameServerInterval(routeRefreshMs);
        producer.setSendMsgTimeout(timeoutMs);
        producer.setMqClientApiTimeout(timeoutMs);
        producer.setRetryTimesWhenSendFailed(0);
        producer.setVipChannelEnabled(false);
        producer.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                return state(String.valueOf(arg));
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                String answer = msg.getUserProperty(RESOLUTION);
                JSONObject check = new JSONObject();
                check.put("key", msg.getKeys());
                check.put("tx_id", msg.getTransactionId());
                check.put("answer", answer);
                check.put("wall_ms", System.currentTimeMillis());
                synchronized (TxProducer.this.checks) {
                    TxProducer.this.checks.add(check);
                }
                return state(answer);
            }
        });
        producer.start();
    }

    private static LocalTransactionState state(String answer) {
        switch (answer) {
            case "commit": return LocalTransactionState.COMMIT_MESSAGE;
            case "rollback": return LocalTransactionState.ROLLBACK_MESSAGE;
            default: return LocalTransactionState.UNKNOW;
        }
    }

    /** Send one message in a transaction whose local answer is `decision` (and, if unknown,
     *  whose check-back answers `resolution`). */
    JSONObject send(String topic, byte[] body, String key, String decision, String resolution) throws Exception {
        Message msg = new Message(topic, body);
        msg.setKeys(key);
        msg.putUserProperty(DECISION, decision);
        msg.putUserProperty(RESOLUTION, resolution);
        TransactionSendResult sent = producer.sendMessageInTransaction(msg, decision);
        JSONObject result = new JSONObject();
        result.put("status", sent.getSendStatus().name());
        result.put("local_state", sent.getLocalTransactionState().name());
        result.put("msg_id", sent.getMsgId());
        result.put("tx_id", sent.getTransactionId());
        result.put("broker_name", sent.getMessageQueue() == null ? null : sent.getMessageQueue().getBrokerName());
        result.put("queue_id", sent.getMessageQueue() == null ? -1 : sent.getMessageQueue().getQueueId());
        return result;
    }

    static JSONArray take(List<JSONObject> checks) {
        synchronized (checks) {
            JSONArray out = new JSONArray(new ArrayList<>(checks));
            checks.clear();
            return out;
        }
    }

    void close() {
        producer.shutdown();
    }
}
