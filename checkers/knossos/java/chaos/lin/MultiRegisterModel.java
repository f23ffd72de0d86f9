package chaos.lin;

/**
 * Several registers changed by transactions, as Knossos' multi-register.
 * State: one value id per register (register i is named by value aux[i]).
 * f 0 txn: in = micro-ops as triples [kind, register, value], kind 0 read,
 * 1 write. A read of value -1 matches anything (its value is unknown, as a
 * Knossos nil read); 0 is null: the register was never written.
 */
final class MultiRegisterModel implements Model {
    static final int ANY = -1;

    @Override
    public Object init(History h) {
        int[] regs = new int[h.aux.length];
        System.arraycopy(h.init, 0, regs, 0, Math.min(h.init.length, regs.length));
        return new IntSeq(regs);
    }

    @Override
    public Object step(Object state, History h, int op) {
        if (h.f[op] != 0) {
            throw new IllegalArgumentException("bad multi-register op " + h.f[op]);
        }
        IntSeq regs = (IntSeq) state;
        for (int i = 0; i < h.inLen[op]; i += 3) {
            int kind = h.in(op, i);
            int reg = h.in(op, i + 1);
            int v = h.in(op, i + 2);
            if (kind == 0) {
                if (v != ANY && regs.get(reg) != v) {
                    return null;
                }
            } else {
                regs = regs.with(reg, v);
            }
        }
        return regs;
    }

    @Override
    public boolean isPure(History h, int op) {
        for (int i = 0; i < h.inLen[op]; i += 3) {
            if (h.in(op, i) != 0) {
                return false;
            }
        }
        return true;
    }

    @Override
    public String describe(Object state, History h) {
        IntSeq regs = (IntSeq) state;
        StringBuilder b = new StringBuilder("{");
        for (int i = 0; i < regs.size(); i++) {
            if (i > 0) {
                b.append(", ");
            }
            String name = h.valueJson[h.aux[i]];
            b.append(name.startsWith("\"") ? name : Json.quote(name));
            b.append(": ").append(h.valueJson[regs.get(i)]);
        }
        return b.append('}').toString();
    }
}
