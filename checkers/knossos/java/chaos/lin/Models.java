package chaos.lin;

/** The one table of model names the engine understands. */
final class Models {
    private Models() {
    }

    static Model byName(String name) {
        switch (name) {
            case "register": return new RegisterModel(false);
            case "cas-register": return new RegisterModel(true);
            case "mutex": return new MutexModel();
            case "set": return new SetModel();
            case "fifo-queue": return new FifoQueueModel();
            case "unordered-queue": return new UnorderedQueueModel();
            case "kv": return new KvModel();
            case "log": return new LogModel();
            case "multi-register": return new MultiRegisterModel();
            default: throw new IllegalArgumentException("unknown model " + name);
        }
    }
}
