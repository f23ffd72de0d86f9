package chaos.lin;

/**
 * A FIFO queue. State: value ids, head first. f 0 enqueue (in [v]),
 * f 1 dequeue (out [v], v = 0 when the queue was empty). A dequeue whose
 * result is unknown takes the head if there is one.
 */
final class FifoQueueModel implements Model {
    @Override
    public Object init(History h) {
        return new IntSeq(h.init.clone());
    }

    @Override
    public Object step(Object state, History h, int op) {
        IntSeq q = (IntSeq) state;
        switch (h.f[op]) {
            case 0:
                return q.append(h.in(op, 0));
            case 1: {
                if (!h.outputKnown(op)) {
                    return q.size() == 0 ? q : q.dropFirst();
                }
                int v = h.out(op, 0);
                if (v == 0) {
                    return q.size() == 0 ? q : null;
                }
                return q.size() > 0 && q.get(0) == v ? q.dropFirst() : null;
            }
            default:
                throw new IllegalArgumentException("bad fifo-queue op " + h.f[op]);
        }
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
