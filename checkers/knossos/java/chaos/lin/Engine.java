package chaos.lin;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The entry point Python calls through JPype: a batch of encoded histories in,
 * a JSON array of verdicts out.
 *
 * Histories of one group are the parts (keys) of one checked history. A group
 * of one part is searched to its end; such groups run in parallel, one per
 * thread. The parts of a bigger group run in parallel too, in rounds of
 * growing step budgets: after each round, if some part was proven not
 * linearizable the others stop (as Porcupine kills the other partitions'
 * searches). The search is deterministic in its steps and a round ends only
 * when every part has used its budget, so which parts are proven invalid, and
 * so the key and op reported, never depend on thread timing.
 */
public final class Engine {
    /** Steps of the first round; each next round doubles the budget. */
    static final long FIRST_ROUND_STEPS = 1 << 12;
    private static final int THREADS = Math.max(1, Integer.getInteger(
            "chaos.lin.threads", Runtime.getRuntime().availableProcessors()));
    private static final java.lang.management.ThreadMXBean THREAD_CPU =
            java.lang.management.ManagementFactory.getThreadMXBean();
    private static final ExecutorService POOL = Executors.newFixedThreadPool(THREADS, r -> {
        Thread t = new Thread(r, "chaos-lin");
        t.setDaemon(true);
        return t;
    });

    private Engine() {
    }

    public static String check(String wire) {
        Wire.Batch batch = new Wire(wire).read();
        long batchDeadline = batch.deadlineMillis > 0
                ? System.nanoTime() + batch.deadlineMillis * 1_000_000L : Long.MAX_VALUE;
        List<History> histories = batch.histories;
        int count = histories.size();
        Result[] results = new Result[count];
        long[] nanos = new long[count];
        long[] cpu = new long[count];
        Map<Integer, List<Integer>> groups = new LinkedHashMap<>();
        for (int k = 0; k < count; k++) {
            groups.computeIfAbsent(histories.get(k).group, g -> new ArrayList<>()).add(k);
        }
        List<Integer> singles = new ArrayList<>();
        for (List<Integer> members : groups.values()) {
            if (members.size() == 1) {
                singles.add(members.get(0));
            }
        }
        // Every search alive at once counts against one memory budget.
        AtomicLong memory = new AtomicLong();
        List<Callable<Void>> tasks = new ArrayList<>();
        for (int k : singles) {
            tasks.add(() -> {
                Search s = new Search(histories.get(k), batchDeadline);
                s.shareMemory(memory);
                histories.set(k, null);
                long start = System.nanoTime();
                long startCpu = THREAD_CPU.getCurrentThreadCpuTime();
                results[k] = guarded(s, Long.MAX_VALUE);
                nanos[k] = System.nanoTime() - start;
                cpu[k] = THREAD_CPU.getCurrentThreadCpuTime() - startCpu;
                return null;
            });
        }
        runAll(tasks);
        for (List<Integer> members : groups.values()) {
            if (members.size() > 1) {
                checkGroup(histories, members, batchDeadline, memory, results, nanos, cpu);
            }
        }
        StringBuilder out = new StringBuilder("[");
        for (int k = 0; k < count; k++) {
            if (k > 0) {
                out.append(",\n");
            }
            results[k].writeTo(out, nanos[k], cpu[k]);
        }
        return out.append(']').toString();
    }

    /** The parts of one history, in rounds, stopping at the first round that proves one invalid. */
    private static void checkGroup(List<History> histories, List<Integer> members, long deadline,
            AtomicLong memory, Result[] results, long[] nanos, long[] cpu) {
        Search[] searches = new Search[members.size()];
        for (int i = 0; i < searches.length; i++) {
            int k = members.get(i);
            searches[i] = new Search(histories.get(k), deadline);
            searches[i].shareMemory(memory);
            histories.set(k, null);
        }
        boolean invalid = false;
        for (long limit = FIRST_ROUND_STEPS; !invalid; limit *= 2) {
            long roundLimit = limit;
            List<Callable<Void>> round = new ArrayList<>();
            for (int i = 0; i < searches.length; i++) {
                int k = members.get(i);
                Search s = searches[i];
                if (results[k] != null) {
                    continue;
                }
                round.add(() -> {
                    long start = System.nanoTime();
                    long startCpu = THREAD_CPU.getCurrentThreadCpuTime();
                    results[k] = guarded(s, roundLimit);
                    nanos[k] += System.nanoTime() - start;
                    cpu[k] += THREAD_CPU.getCurrentThreadCpuTime() - startCpu;
                    return null;
                });
            }
            if (round.isEmpty()) {
                return;
            }
            runAll(round);
            for (int k : members) {
                invalid |= results[k] != null && results[k].isInvalid();
            }
        }
        for (int i = 0; i < searches.length; i++) {
            int k = members.get(i);
            if (results[k] == null) {
                results[k] = Result.unknown("stopped", "another part of the history was proven "
                        + "not linearizable first", 0, searches[i].steps());
            }
        }
    }

    private static Result guarded(Search s, long stepLimit) {
        try {
            return s.advance(stepLimit);
        } catch (OutOfMemoryError e) {
            return Result.unknown("memory", "the JVM ran out of heap: " + e.getMessage(), 0, 0);
        }
    }

    private static void runAll(List<Callable<Void>> tasks) {
        if (tasks.size() == 1 || THREADS == 1) {
            for (Callable<Void> t : tasks) {
                try {
                    t.call();
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            }
            return;
        }
        try {
            for (Future<Void> f : POOL.invokeAll(tasks)) {
                f.get();
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted", e);
        } catch (ExecutionException e) {
            throw new IllegalStateException(e.getCause());
        }
    }

    /** Lets the Python side see that the jar it loaded is the one it built. */
    public static String version() {
        return "chaos-lin 2";
    }
}
