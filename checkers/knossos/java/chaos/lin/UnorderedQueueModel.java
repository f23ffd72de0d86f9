package chaos.lin;

/**
 * A queue without order: a multiset. State: sorted value ids with repeats.
 * f 0 enqueue (in [v]), f 1 dequeue (out [v], 0 when empty). A dequeue whose
 * result is unknown may have taken any element: one branch per distinct
 * element, which is why this model returns Branches.
 */
final class UnorderedQueueModel implements Model {
    @Override
    public Object init(History h) {
        int[] a = h.init.clone();
        java.util.Arrays.sort(a);
        return new IntSeq(a);
    }

    @Override
    public Object step(Object state, History h, int op) {
        IntSeq q = (IntSeq) state;
        switch (h.f[op]) {
            case 0:
                return q.insertSorted(h.in(op, 0));
            case 1: {
                if (!h.outputKnown(op)) {
                    return anyDequeue(q);
                }
                int v = h.out(op, 0);
                if (v == 0) {
                    return q.size() == 0 ? q : null;
                }
                int at = q.indexOfSorted(v);
                return at >= 0 ? q.removeAt(at) : null;
            }
            default:
                throw new IllegalArgumentException("bad unordered-queue op " + h.f[op]);
        }
    }

    private static Object anyDequeue(IntSeq q) {
        if (q.size() == 0) {
            return q;
        }
        int distinct = 1;
        for (int i = 1; i < q.size(); i++) {
            if (q.get(i) != q.get(i - 1)) {
                distinct++;
            }
        }
        if (distinct == 1) {
            return q.removeAt(0);
        }
        Object[] out = new Object[distinct];
        int k = 0;
        for (int i = 0; i < q.size(); i++) {
            if (i == 0 || q.get(i) != q.get(i - 1)) {
                out[k++] = q.removeAt(i);
            }
        }
        return new Branches(out);
    }

    @Override
    public boolean isPure(History h, int op) {
        return h.f[op] == 1 && h.outputKnown(op) && h.out(op, 0) == 0;
    }

    @Override
    public String describe(Object state, History h) {
        return ((IntSeq) state).describe(h);
    }
}
