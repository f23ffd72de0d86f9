package chaos.lin;

/**
 * One key of a string key-value store, as Porcupine's and etcd's kv tests:
 * State: the string ("" when absent). f 0 get (out [s]), f 1 put (in [s]),
 * f 2 append (in [s]). Histories are split by key before they get here.
 */
final class KvModel implements Model {
    @Override
    public Object init(History h) {
        return h.init.length > 0 ? h.string(h.init[0]) : "";
    }

    @Override
    public Object step(Object state, History h, int op) {
        String s = (String) state;
        switch (h.f[op]) {
            case 0:
                return !h.outputKnown(op) || h.string(h.out(op, 0)).equals(s) ? s : null;
            case 1:
                return h.string(h.in(op, 0));
            case 2:
                return s.concat(h.string(h.in(op, 0)));
            default:
                throw new IllegalArgumentException("bad kv op " + h.f[op]);
        }
    }

    @Override
    public boolean isPure(History h, int op) {
        return h.f[op] == 0;
    }

    @Override
    public String describe(Object state, History h) {
        return Json.quote((String) state);
    }
}
