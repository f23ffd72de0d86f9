package chaos.lin;

/**
 * A read/write register, optionally with compare-and-set. State: the value id.
 * f 0 read (out [v]), f 1 write (in [v]), f 2 cas (in [expected, new]).
 * A read of null (id 0) saw an empty register; reads whose value is unknown
 * (Knossos' nil reads) are left out by the Python side before they get here.
 */
final class RegisterModel implements Model {
    static final int READ = 0;
    static final int WRITE = 1;
    static final int CAS = 2;
    private final boolean cas;

    RegisterModel(boolean cas) {
        this.cas = cas;
    }

    @Override
    public Object init(History h) {
        return h.init.length > 0 ? h.init[0] : 0;
    }

    @Override
    public Object step(Object state, History h, int op) {
        int v = (Integer) state;
        switch (h.f[op]) {
            case READ:
                if (!h.outputKnown(op) || h.out(op, 0) == v) {
                    return state;
                }
                return null;
            case WRITE:
                return h.in(op, 0);
            case CAS:
                if (!cas) {
                    throw new IllegalArgumentException("register has no cas; use cas-register");
                }
                return h.in(op, 0) == v ? (Object) h.in(op, 1) : null;
            default:
                throw new IllegalArgumentException("bad register op " + h.f[op]);
        }
    }

    @Override
    public boolean isPure(History h, int op) {
        return h.f[op] == READ;
    }

    @Override
    public String describe(Object state, History h) {
        return h.valueJson[(Integer) state];
    }
}
