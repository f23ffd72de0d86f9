package chaos.lin;

/**
 * An append-only log (one RocketMQ queue): appends get consecutive offsets
 * from 0; a read of an offset returns the payload there or null past the end.
 * State: payload ids in offset order.
 * f 0 append (in [payload], out [offset]); f 1 read (in [offset], out [payload or 0]).
 * Offsets are plain ints, not value ids.
 */
final class LogModel implements Model {
    @Override
    public Object init(History h) {
        return new IntSeq(h.init.clone());
    }

    @Override
    public Object step(Object state, History h, int op) {
        IntSeq log = (IntSeq) state;
        switch (h.f[op]) {
            case 0:
                if (h.outputKnown(op) && h.out(op, 0) != log.size()) {
                    return null;
                }
                return log.append(h.in(op, 0));
            case 1: {
                if (!h.outputKnown(op)) {
                    return log;
                }
                int offset = h.in(op, 0);
                int seen = h.out(op, 0);
                int there = offset >= 0 && offset < log.size() ? log.get(offset) : 0;
                return seen == there ? log : null;
            }
            default:
                throw new IllegalArgumentException("bad log op " + h.f[op]);
        }
    }

    @Override
    public boolean isPure(History h, int op) {
        return h.f[op] == 1;
    }

    @Override
    public String describe(Object state, History h) {
        return ((IntSeq) state).describe(h);
    }
}
