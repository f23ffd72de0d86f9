package chaos.lin;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * The Wing & Gong search with Lowe's cache, as Knossos' wgl and Porcupine do.
 *
 * Calls and returns sit in one doubly linked list in real-time order. Walking
 * from the head, a call may be linearized if the model accepts it; then it and
 * its return are lifted out of the list and the walk restarts at the head.
 * Reaching a return means that op could not be placed before it: undo the last
 * choice (a stack) and try the next call. A configuration (linearized set,
 * state) seen before is skipped, which turns the exponential walk into a
 * search over distinct configurations.
 *
 * Reads (ops that never change the state) are linearized as soon as they
 * are possible, without trying alternatives: moving a read earlier, to a point
 * where it is possible, changes no state and only widens what may follow, so
 * a configuration has a way through iff the one with the read done has. This
 * partial-order reduction removes the branching over reads, which dominate
 * register histories with many concurrent clients.
 *
 * Indeterminate (info) ops with the same effect (same op code, input and
 * output) are interchangeable: once callable they stay callable, so taking one
 * or another leads to mirror-image searches. Each such class is taken in call
 * order: only its earliest untaken member is tried. Crashed writes of a
 * handful of values, crashed acquires, anonymous crashed appends all collapse.
 *
 * Indeterminate (info) ops have their return at the end of the list, after
 * every ok return: reaching one means every ok op has been placed, so the
 * history is linearizable whether or not the remaining info ops happened.
 *
 * Bit ids: ok ops get 0..ok-1 in order of completion, info ops after them (as
 * Knossos does). The first ok id missing from a configuration tells how far it
 * got; the op at the largest such id over all configurations is the one that
 * could not be linearized. For an invalid history the search visits every
 * reachable configuration, so that op does not depend on the search order.
 */
final class Search {
    static final int REPORTED_CONFIGS = 10;
    static final int REPORTED_PENDING = 100;
    private static final int HEAD = 0;
    private static final int FORCED = -1;

    private final History h;
    private final Model model;
    private final int n;
    private final int okCount;
    private final int[] bitOf;
    private final int[] opOfBit;
    private final int[] next;
    private final int[] prev;
    private final long deadline;
    private final boolean[] pure;
    private final int[] classOf;
    private final int[] rankInClass;
    private int[] taken;
    private LinearizedSet lin;

    // The walk's own state lives in fields so that a search can stop after a
    // number of steps and resume later (Engine runs the keys of one history
    // in rounds of growing step budgets; see Engine.checkGroup).
    private ConfigCache cache;
    private long bytes;
    private long budget;
    private long maxConfigs;
    private java.util.concurrent.atomic.AtomicLong sharedBytes;
    private int[] stackEntry;
    private Object[] stackState;
    private int[] stackAlt;
    private int depth;
    private int entry;
    private int alt;
    private boolean fresh;
    private Object state;
    private long steps;
    private Result done;

    private int bestFirstMissing = -1;
    private final List<long[][]> bestSets = new ArrayList<>();
    private final List<Object> bestStates = new ArrayList<>();
    private final List<Integer> bestLastOps = new ArrayList<>();

    Search(History h, long batchDeadline) {
        this.h = h;
        this.model = Models.byName(h.model);
        this.n = h.n;
        long own = h.timeLimitNanos > 0 ? System.nanoTime() + h.timeLimitNanos : Long.MAX_VALUE;
        this.deadline = Math.min(own, batchDeadline);
        this.pure = new boolean[n];
        for (int o = 0; o < n; o++) {
            pure[o] = model.isPure(h, o);
        }
        this.bitOf = new int[n];
        this.opOfBit = new int[n];
        int ok = 0;
        long[] byReturn = new long[n];
        long[] byCall = new long[n];
        for (int o = 0; o < n; o++) {
            if (!h.isInfo(o)) {
                byReturn[ok++] = ((long) h.ret[o] << 32) | o;
            }
            byCall[o] = ((long) h.call[o] << 32) | o;
        }
        this.okCount = ok;
        Arrays.sort(byReturn, 0, ok);
        Arrays.sort(byCall);
        int bit = 0;
        for (int i = 0; i < ok; i++) {
            int o = (int) byReturn[i];
            bitOf[o] = bit;
            opOfBit[bit++] = o;
        }
        for (long c : byCall) {
            int o = (int) c;
            if (h.isInfo(o)) {
                bitOf[o] = bit;
                opOfBit[bit++] = o;
            }
        }
        this.next = new int[2 * n + 1];
        this.prev = new int[2 * n + 1];
        linkEntries(byCall, byReturn, ok);
        this.classOf = new int[n];
        this.rankInClass = new int[n];
        classifyInfoOps(byCall);
    }

    /** Groups info ops by identical effect; rank = position in call order. */
    private void classifyInfoOps(long[] byCall) {
        java.util.HashMap<String, Integer> ids = new java.util.HashMap<>();
        java.util.ArrayList<Integer> sizes = new java.util.ArrayList<>();
        Arrays.fill(classOf, -1);
        for (long c : byCall) {
            int o = (int) c;
            if (!h.isInfo(o)) {
                continue;
            }
            StringBuilder k = new StringBuilder().append(h.f[o]).append(':');
            for (int i = 0; i < h.inLen[o]; i++) {
                k.append(h.in(o, i)).append(',');
            }
            k.append('|');
            for (int i = 0; i < h.outLen[o]; i++) {
                k.append(h.out(o, i)).append(',');
            }
            Integer id = ids.get(k.toString());
            if (id == null) {
                id = sizes.size();
                ids.put(k.toString(), id);
                sizes.add(0);
            }
            classOf[o] = id;
            rankInClass[o] = sizes.get(id);
            sizes.set(id, sizes.get(id) + 1);
        }
        taken = new int[sizes.size()];
    }

    /** Whether op may be tried now: ok ops always, info ops in call order within their class. */
    private boolean mayTry(int op) {
        int c = classOf[op];
        return c < 0 || rankInClass[op] == taken[c];
    }

    private void lift(int callEntry) {
        unlink(callEntry);
        unlink(callEntry + 1);
        int c = classOf[(callEntry - 1) >> 1];
        if (c >= 0) {
            taken[c]++;
        }
    }

    private void unlift(int callEntry) {
        relink(callEntry + 1);
        relink(callEntry);
        int c = classOf[(callEntry - 1) >> 1];
        if (c >= 0) {
            taken[c]--;
        }
    }

    /** Entry 0 is the head; op o has call entry 2o+1 and return entry 2o+2. */
    private void linkEntries(long[] byCall, long[] byReturn, int ok) {
        long[] events = new long[n + ok];
        for (int o = 0; o < n; o++) {
            events[o] = ((long) h.call[o] << 32) | (2 * o + 1);
        }
        for (int i = 0; i < ok; i++) {
            int o = (int) byReturn[i];
            events[n + i] = ((long) h.ret[o] << 32) | (2 * o + 2);
        }
        Arrays.sort(events);
        int last = HEAD;
        for (long ev : events) {
            last = append(last, (int) ev);
        }
        for (long c : byCall) {
            int o = (int) c;
            if (h.isInfo(o)) {
                last = append(last, 2 * o + 2);
            }
        }
        next[last] = HEAD;
        prev[HEAD] = last;
    }

    private int append(int last, int entry) {
        next[last] = entry;
        prev[entry] = last;
        return entry;
    }

    private void unlink(int e) {
        next[prev[e]] = next[e];
        prev[next[e]] = prev[e];
    }

    private void relink(int e) {
        next[prev[e]] = e;
        prev[next[e]] = e;
    }

    /** Runs the search to its end (verdict, time limit or memory guard). */
    Result run() {
        return advance(Long.MAX_VALUE);
    }

    /** Steps taken so far; the search is deterministic in them. */
    long steps() {
        return steps;
    }

    /**
     * Lets the configurations of all searches of a group count against one
     * memory budget (the parts of one history are alive at the same time).
     */
    void shareMemory(java.util.concurrent.atomic.AtomicLong counter) {
        this.sharedBytes = counter;
    }

    private void start() {
        state = model.init(h);
        lin = new LinearizedSet(n, okCount);
        cache = new ConfigCache();
        long[][] first = cache.add(ConfigCache.key(lin.hash(), state), state, lin);
        noteProgress(lin.firstMissingOk(), first, state, -1);
        bytes = 0;
        budget = h.memoryBudget > 0 ? h.memoryBudget : Long.MAX_VALUE;
        maxConfigs = h.maxConfigs > 0 ? h.maxConfigs : Long.MAX_VALUE;
        grow(lin.snapshotBytes() + ConfigCache.slotBytes());
        stackEntry = new int[n];
        stackState = new Object[n];
        stackAlt = new int[n];
        depth = 0;
        entry = next[HEAD];
        alt = 0;
        fresh = true;
    }

    /** Counts a new configuration's bytes; true while under the memory guard. */
    private boolean grow(long more) {
        bytes += more;
        long total = sharedBytes == null ? bytes : sharedBytes.addAndGet(more);
        return total <= budget && cache.size() <= maxConfigs;
    }

    /**
     * Searches until the verdict or until `stepLimit` steps in all (then
     * returns null; call again to go on). The verdict is kept and returned
     * again by later calls.
     */
    Result advance(long stepLimit) {
        if (done != null) {
            return done;
        }
        if (cache == null) {
            start();
        }
        done = walk(stepLimit);
        if (done != null) {
            release();
        }
        return done;
    }

    /** Drops the cache once the verdict is known (its memory may be needed by other parts). */
    private void release() {
        if (sharedBytes != null) {
            sharedBytes.addAndGet(-bytes);
        }
        cache = null;
        stackState = null;
        state = null;
    }

    private Result walk(long stepLimit) {
        search:
        while (true) {
            if (steps >= stepLimit) {
                return null;
            }
            if ((++steps & 1023) == 0 && System.nanoTime() > deadline) {
                return Result.unknown("timeout", "time limit reached after exploring "
                        + cache.size() + " configurations", cache.size(), steps);
            }
            boolean dead = false;
            if (fresh) {
                // A new configuration: first take any read that is possible now.
                fresh = false;
                for (int e = next[HEAD]; e != HEAD && (e & 1) == 1; e = next[e]) {
                    int op = (e - 1) >> 1;
                    if (!pure[op] || !mayTry(op) || model.step(state, h, op) == null) {
                        continue;
                    }
                    lin.set(bitOf[op]);
                    long[][] snap = cache.add(ConfigCache.key(lin.hash(), state), state, lin);
                    if (snap == null) {
                        lin.clear(bitOf[op]);
                        dead = true;  // explored before, without success
                        break;
                    }
                    if (!grow(lin.snapshotBytes() + ConfigCache.slotBytes())) {
                        return overMemory(cache, bytes, steps);
                    }
                    noteProgress(lin.firstMissingOk(), snap, state, op);
                    stackEntry[depth] = e;
                    stackState[depth] = state;
                    stackAlt[depth] = FORCED;
                    depth++;
                    lift(e);
                    fresh = true;
                    entry = next[HEAD];
                    alt = 0;
                    continue search;
                }
            }
            if (entry == HEAD && !dead) {
                return Result.valid(cache.size(), steps);
            }
            int op = (entry - 1) >> 1;
            if (dead || (entry & 1) == 0) {
                // A return: its op could not be placed before this point.
                if (!dead && h.isInfo(op)) {
                    return Result.valid(cache.size(), steps);
                }
                do {
                    if (depth == 0) {
                        return invalid(cache.size(), steps);
                    }
                    depth--;
                    entry = stackEntry[depth];
                    state = stackState[depth];
                    stackState[depth] = null;
                    alt = stackAlt[depth] + 1;
                    lin.clear(bitOf[(entry - 1) >> 1]);
                    unlift(entry);
                } while (alt == FORCED + 1);
                continue;
            }
            Object stepped = mayTry(op) ? model.step(state, h, op) : null;
            if (stepped != null) {
                Object[] options = stepped instanceof Model.Branches
                        ? ((Model.Branches) stepped).states : null;
                int count = options == null ? 1 : options.length;
                int bit = bitOf[op];
                for (int a = alt; a < count; a++) {
                    Object next2 = options == null ? stepped : options[a];
                    lin.set(bit);
                    long[][] snap = cache.add(ConfigCache.key(lin.hash(), next2), next2, lin);
                    if (snap == null) {
                        lin.clear(bit);
                        continue;
                    }
                    if (!grow(lin.snapshotBytes() + ConfigCache.slotBytes())) {
                        return overMemory(cache, bytes, steps);
                    }
                    noteProgress(lin.firstMissingOk(), snap, next2, op);
                    stackEntry[depth] = entry;
                    stackState[depth] = state;
                    stackAlt[depth] = a;
                    depth++;
                    state = next2;
                    lift(entry);
                    entry = next[HEAD];
                    alt = 0;
                    fresh = true;
                    continue search;
                }
            }
            alt = 0;
            entry = next[entry];
        }
    }

    private static Result overMemory(ConfigCache cache, long bytes, long steps) {
        return Result.unknown("memory", "configuration cache reached " + cache.size()
                + " entries (~" + (bytes >> 20) + " MiB), over the memory guard", cache.size(), steps);
    }

    private void noteProgress(int firstMissing, long[][] set, Object state, int lastOp) {
        if (firstMissing > bestFirstMissing) {
            bestFirstMissing = firstMissing;
            bestSets.clear();
            bestStates.clear();
            bestLastOps.clear();
        }
        if (firstMissing == bestFirstMissing && bestSets.size() < REPORTED_CONFIGS) {
            bestSets.add(set);
            bestStates.add(state);
            bestLastOps.add(lastOp);
        }
    }

    private Result invalid(int configs, long steps) {
        int failing = opOfBit[bestFirstMissing];
        Result r = Result.invalid(failing, configs, steps);
        for (int i = 0; i < bestSets.size(); i++) {
            long[][] set = bestSets.get(i);
            List<Integer> pending = new ArrayList<>();
            int count = 0;
            for (int o = 0; o < n; o++) {
                if (h.call[o] < h.ret[failing] && !lin.isIn(set, bitOf[o])) {
                    if (count++ < REPORTED_PENDING) {
                        pending.add(o);
                    }
                }
            }
            r.addConfig(model.describe(bestStates.get(i), h), bestLastOps.get(i), pending, count);
        }
        return r;
    }
}
