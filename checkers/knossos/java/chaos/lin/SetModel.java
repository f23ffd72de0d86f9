package chaos.lin;

/**
 * A grow-only set. State: sorted distinct value ids. f 0 add (in [v]),
 * f 1 read (out = the sorted distinct ids seen).
 */
final class SetModel implements Model {
    @Override
    public Object init(History h) {
        IntSeq s = IntSeq.EMPTY;
        for (int v : h.init) {
            if (s.indexOfSorted(v) < 0) {
                s = s.insertSorted(v);
            }
        }
        return s;
    }

    @Override
    public Object step(Object state, History h, int op) {
        IntSeq s = (IntSeq) state;
        switch (h.f[op]) {
            case 0: {
                int v = h.in(op, 0);
                return s.indexOfSorted(v) >= 0 ? s : s.insertSorted(v);
            }
            case 1:
                return !h.outputKnown(op) || s.sameItems(h, op, true) ? s : null;
            default:
                throw new IllegalArgumentException("bad set op " + h.f[op]);
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
