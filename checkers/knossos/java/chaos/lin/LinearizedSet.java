package chaos.lin;

import java.util.SplittableRandom;

/**
 * The set of linearized ops: a bitset split into chunks that are shared,
 * copy-on-write, with the snapshots kept in the cache.
 *
 * Every cached configuration needs its own copy of the set. A flat copy costs
 * n/64 words per configuration, which makes a 100k-op history need gigabytes;
 * with chunks of about sqrt(n/64) words a snapshot copies one pointer array
 * and later changes copy one chunk, so memory per configuration stays in the
 * hundreds of bytes. A Zobrist hash (xor of a random word per op) is kept up
 * to date in O(1), so hashing a configuration never walks the bits.
 */
final class LinearizedSet {
    private final int shift;
    private final int mask;
    private long[][] chunks;
    private final int[] ownedEpoch;
    private int epoch = 1;
    private final long[] zobrist;
    private long hash;
    private final int okCount;
    private int firstMissingOk;

    LinearizedSet(int n, int okCount) {
        int words = Math.max(1, (n + 63) >>> 6);
        int chunkWords = Integer.highestOneBit(Math.max(1, (int) Math.sqrt(words)));
        this.shift = Integer.numberOfTrailingZeros(chunkWords);
        this.mask = chunkWords - 1;
        int nChunks = (words + chunkWords - 1) / chunkWords;
        this.chunks = new long[nChunks][chunkWords];
        this.ownedEpoch = new int[nChunks];
        java.util.Arrays.fill(ownedEpoch, epoch);
        this.zobrist = new long[n];
        SplittableRandom rnd = new SplittableRandom(0x5eed_1ea5L);
        for (int i = 0; i < n; i++) {
            zobrist[i] = rnd.nextLong();
        }
        this.okCount = okCount;
    }

    long hash() {
        return hash;
    }

    /** Bit ids below this are all set: every ok op up to here is linearized. */
    int firstMissingOk() {
        return firstMissingOk;
    }

    boolean get(int bit) {
        int w = bit >>> 6;
        return (chunks[w >>> shift][w & mask] & (1L << bit)) != 0;
    }

    void set(int bit) {
        writable(bit)[(bit >>> 6) & mask] |= 1L << bit;
        hash ^= zobrist[bit];
        if (bit == firstMissingOk && bit < okCount) {
            do {
                firstMissingOk++;
            } while (firstMissingOk < okCount && get(firstMissingOk));
        }
    }

    void clear(int bit) {
        writable(bit)[(bit >>> 6) & mask] &= ~(1L << bit);
        hash ^= zobrist[bit];
        if (bit < firstMissingOk) {
            firstMissingOk = bit;
        }
    }

    private long[] writable(int bit) {
        int c = bit >>> 6 >>> shift;
        if (ownedEpoch[c] != epoch) {
            chunks[c] = chunks[c].clone();
            ownedEpoch[c] = epoch;
        }
        return chunks[c];
    }

    /** An immutable copy sharing every chunk; later writes copy the chunk they touch. */
    long[][] snapshot() {
        epoch++;
        return chunks.clone();
    }

    boolean sameAs(long[][] snap) {
        for (int c = 0; c < snap.length; c++) {
            if (snap[c] != chunks[c] && !java.util.Arrays.equals(snap[c], chunks[c])) {
                return false;
            }
        }
        return true;
    }

    /** Whether bit is set in a snapshot taken from this set. */
    boolean isIn(long[][] snap, int bit) {
        int w = bit >>> 6;
        return (snap[w >>> shift][w & mask] & (1L << bit)) != 0;
    }

    /** Bytes one new snapshot adds: the pointer array plus the chunk the next write copies. */
    long snapshotBytes() {
        return 16L + 8L * chunks.length + 16L + 8L * (mask + 1);
    }
}
