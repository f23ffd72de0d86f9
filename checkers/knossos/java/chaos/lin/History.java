package chaos.lin;

/**
 * One history as the engine sees it: operations already paired by the Python
 * side (invoke + completion), values interned to small ints.
 *
 * Value id 0 is always null. Each op has a call position and a return
 * position in real-time order; an indeterminate (info) op has no return
 * (ret = -1): it may take effect at any later point or never. Inputs and
 * outputs are int lists whose meaning belongs to the model; an output length
 * of -1 means "not known" (the op crashed, or the client did not see it).
 */
final class History {
    final String model;
    final String[] valueJson;
    private final String[] decoded;
    final int[] init;
    final int[] aux;
    final int n;
    final int[] call;
    final int[] ret;
    final int[] f;
    final int[] inOff;
    final int[] inLen;
    final int[] outOff;
    final int[] outLen;
    final int[] data;
    final long timeLimitNanos;
    final long maxConfigs;
    final long memoryBudget;
    /** Histories of one group are the independent parts (keys) of one checked history. */
    final int group;

    History(String model, String[] valueJson, int[] init, int[] aux, int n, int[] call, int[] ret,
            int[] f, int[] inOff, int[] inLen, int[] outOff, int[] outLen, int[] data,
            long timeLimitNanos, long maxConfigs, long memoryBudget, int group) {
        this.model = model;
        this.valueJson = valueJson;
        this.decoded = new String[valueJson.length];
        this.init = init;
        this.aux = aux;
        this.n = n;
        this.call = call;
        this.ret = ret;
        this.f = f;
        this.inOff = inOff;
        this.inLen = inLen;
        this.outOff = outOff;
        this.outLen = outLen;
        this.data = data;
        this.timeLimitNanos = timeLimitNanos;
        this.maxConfigs = maxConfigs;
        this.memoryBudget = memoryBudget;
        this.group = group;
    }

    int in(int op, int i) {
        return data[inOff[op] + i];
    }

    int out(int op, int i) {
        return data[outOff[op] + i];
    }

    boolean outputKnown(int op) {
        return outLen[op] >= 0;
    }

    boolean isInfo(int op) {
        return ret[op] < 0;
    }

    /** The Java string behind a value id whose JSON is a string (kv model); "" for null. */
    String string(int id) {
        String s = decoded[id];
        if (s == null) {
            s = Json.decodeString(valueJson[id]);
            decoded[id] = s;
        }
        return s;
    }
}
