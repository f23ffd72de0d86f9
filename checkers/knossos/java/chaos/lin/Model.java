package chaos.lin;

/**
 * A sequential specification: pure functions from (state, op) to the next
 * state. States must be immutable and implement equals/hashCode, because the
 * search caches (linearized set, state) pairs and compares them.
 *
 * The search knows nothing of any concrete model; models know nothing of the
 * search. Op inputs and outputs come from {@link History} as int lists whose
 * layout each model documents (docs/linearizability.md lists them all).
 */
interface Model {
    /** The initial state, from the init ids the Python side encoded. */
    Object init(History h);

    /**
     * The state after op, or null when op cannot happen in this state. A model
     * whose op has several possible outcomes (a dequeue whose result nobody
     * saw) returns a {@link Branches}.
     */
    Object step(Object state, History h, int op);

    /**
     * Whether op never changes the state in any state where it can happen (a
     * read). The search linearizes such an op as soon as it can without
     * trying alternatives: doing it earlier never hurts a later op.
     */
    default boolean isPure(History h, int op) {
        return false;
    }

    /** The state as JSON text, for the counterexample in the report. */
    String describe(Object state, History h);

    /** Several possible successor states of one op. */
    final class Branches {
        final Object[] states;

        Branches(Object[] states) {
            this.states = states;
        }
    }
}
