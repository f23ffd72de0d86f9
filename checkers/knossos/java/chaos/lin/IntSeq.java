package chaos.lin;

import java.util.Arrays;

/**
 * An immutable int sequence with a cached hash: the state of the collection
 * models (set, queues, log, multi-register). Immutable because cached
 * configurations keep references to states.
 */
final class IntSeq {
    static final IntSeq EMPTY = new IntSeq(new int[0]);

    final int[] items;
    private final int hash;

    IntSeq(int[] items) {
        this.items = items;
        this.hash = Arrays.hashCode(items);
    }

    int size() {
        return items.length;
    }

    int get(int i) {
        return items[i];
    }

    IntSeq append(int v) {
        int[] a = Arrays.copyOf(items, items.length + 1);
        a[items.length] = v;
        return new IntSeq(a);
    }

    IntSeq dropFirst() {
        return new IntSeq(Arrays.copyOfRange(items, 1, items.length));
    }

    IntSeq removeAt(int i) {
        int[] a = new int[items.length - 1];
        System.arraycopy(items, 0, a, 0, i);
        System.arraycopy(items, i + 1, a, i, items.length - i - 1);
        return new IntSeq(a);
    }

    /** Inserts v keeping the sequence sorted (multiset semantics). */
    IntSeq insertSorted(int v) {
        int at = Arrays.binarySearch(items, v);
        if (at < 0) {
            at = -at - 1;
        }
        int[] a = new int[items.length + 1];
        System.arraycopy(items, 0, a, 0, at);
        a[at] = v;
        System.arraycopy(items, at, a, at + 1, items.length - at);
        return new IntSeq(a);
    }

    int indexOfSorted(int v) {
        return Arrays.binarySearch(items, v);
    }

    IntSeq with(int i, int v) {
        if (items[i] == v) {
            return this;
        }
        int[] a = items.clone();
        a[i] = v;
        return new IntSeq(a);
    }

    boolean sameItems(History h, int op, boolean output) {
        int len = output ? h.outLen[op] : h.inLen[op];
        int off = output ? h.outOff[op] : h.inOff[op];
        if (len != items.length) {
            return false;
        }
        for (int i = 0; i < len; i++) {
            if (h.data[off + i] != items[i]) {
                return false;
            }
        }
        return true;
    }

    @Override
    public int hashCode() {
        return hash;
    }

    @Override
    public boolean equals(Object o) {
        return this == o || (o instanceof IntSeq && ((IntSeq) o).hash == hash
                && Arrays.equals(((IntSeq) o).items, items));
    }

    String describe(History h) {
        StringBuilder b = new StringBuilder("[");
        for (int i = 0; i < items.length; i++) {
            if (i > 0) {
                b.append(", ");
            }
            b.append(h.valueJson[items[i]]);
        }
        return b.append(']').toString();
    }
}
