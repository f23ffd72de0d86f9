package chaos.lin;

/** A lock. State: Boolean held. f 0 acquire (only when free), f 1 release (only when held). */
final class MutexModel implements Model {
    @Override
    public Object init(History h) {
        return h.init.length > 0 && h.init[0] != 0;
    }

    @Override
    public Object step(Object state, History h, int op) {
        boolean held = (Boolean) state;
        switch (h.f[op]) {
            case 0: return held ? null : Boolean.TRUE;
            case 1: return held ? Boolean.FALSE : null;
            default: throw new IllegalArgumentException("bad mutex op " + h.f[op]);
        }
    }

    @Override
    public String describe(Object state, History h) {
        return (Boolean) state ? "\"held\"" : "\"free\"";
    }
}
