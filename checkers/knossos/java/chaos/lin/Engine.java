package chaos.lin;

import java.util.List;

/**
 * The entry point Python calls through JPype: a batch of encoded histories in,
 * a JSON array of verdicts out. Histories are checked one after another in
 * the calling thread.
 */
public final class Engine {
    private Engine() {
    }

    public static String check(String wire) {
        Wire.Batch batch = new Wire(wire).read();
        long batchDeadline = batch.deadlineMillis > 0
                ? System.nanoTime() + batch.deadlineMillis * 1_000_000L : Long.MAX_VALUE;
        List<History> histories = batch.histories;
        StringBuilder out = new StringBuilder("[");
        for (int k = 0; k < histories.size(); k++) {
            if (k > 0) {
                out.append(",\n");
            }
            History h = histories.get(k);
            histories.set(k, null);
            long start = System.nanoTime();
            Result r;
            try {
                r = new Search(h, batchDeadline).run();
            } catch (OutOfMemoryError e) {
                r = Result.unknown("memory", "the JVM ran out of heap: " + e.getMessage(), 0, 0);
            }
            r.writeTo(out, System.nanoTime() - start);
        }
        return out.append(']').toString();
    }

    /** Lets the Python side see that the jar it loaded is the one it built. */
    public static String version() {
        return "chaos-lin 1";
    }
}
