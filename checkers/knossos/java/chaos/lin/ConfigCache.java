package chaos.lin;

/**
 * The set of configurations (linearized set, model state) already explored,
 * as in Lowe's refinement of Wing and Gong: reaching one twice cannot lead
 * anywhere new. Open addressing keyed by the Zobrist hash of the set mixed
 * with the state's hash; full equality on a hash match.
 */
final class ConfigCache {
    private long[] hashes;
    private Object[] states;
    private long[][][] sets;
    private int size;

    ConfigCache() {
        hashes = new long[1024];
        states = new Object[1024];
        sets = new long[1024][][];
    }

    int size() {
        return size;
    }

    static long key(long setHash, Object state) {
        long h = setHash ^ (state.hashCode() * 0x9E3779B97F4A7C15L);
        h ^= h >>> 31;
        h *= 0xBF58476D1CE4E5B9L;
        h ^= h >>> 29;
        return h == 0 ? 1 : h;
    }

    /**
     * Adds the configuration unless present and returns its snapshot of the
     * linearized set, or null when it was already there. The snapshot is
     * taken only for new configurations.
     */
    long[][] add(long key, Object state, LinearizedSet live) {
        int m = hashes.length - 1;
        int i = (int) key & m;
        while (hashes[i] != 0) {
            if (hashes[i] == key && states[i].equals(state) && live.sameAs(sets[i])) {
                return null;
            }
            i = (i + 1) & m;
        }
        long[][] snap = live.snapshot();
        hashes[i] = key;
        states[i] = state;
        sets[i] = snap;
        if (++size * 2 > hashes.length) {
            grow();
        }
        return snap;
    }

    private void grow() {
        long[] oh = hashes;
        Object[] os = states;
        long[][][] oz = sets;
        int cap = oh.length * 2;
        hashes = new long[cap];
        states = new Object[cap];
        sets = new long[cap][][];
        int m = cap - 1;
        for (int j = 0; j < oh.length; j++) {
            if (oh[j] != 0) {
                int i = (int) oh[j] & m;
                while (hashes[i] != 0) {
                    i = (i + 1) & m;
                }
                hashes[i] = oh[j];
                states[i] = os[j];
                sets[i] = oz[j];
            }
        }
    }

    /** Bytes per slot of the table itself (hash, state ref, set ref), at half load. */
    static long slotBytes() {
        return 2 * (8 + 4 + 4);
    }
}
