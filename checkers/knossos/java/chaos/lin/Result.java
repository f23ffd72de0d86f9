package chaos.lin;

import java.util.ArrayList;
import java.util.List;

/** The verdict of one history, written as JSON for the Python side (op numbers, not op maps). */
final class Result {
    private final String valid;
    private final String cause;
    private final String detail;
    private final int failingOp;
    private final int configs;
    private final long steps;
    private final List<String> configJson = new ArrayList<>();

    private Result(String valid, String cause, String detail, int failingOp, int configs, long steps) {
        this.valid = valid;
        this.cause = cause;
        this.detail = detail;
        this.failingOp = failingOp;
        this.configs = configs;
        this.steps = steps;
    }

    static Result valid(int configs, long steps) {
        return new Result("true", null, null, -1, configs, steps);
    }

    static Result invalid(int failingOp, int configs, long steps) {
        return new Result("false", null, null, failingOp, configs, steps);
    }

    static Result unknown(String cause, String detail, int configs, long steps) {
        return new Result("\"unknown\"", cause, detail, -1, configs, steps);
    }

    boolean isInvalid() {
        return failingOp >= 0;
    }

    void addConfig(String modelJson, int lastOp, List<Integer> pending, int pendingCount) {
        StringBuilder b = new StringBuilder("{\"model\": ").append(modelJson);
        b.append(", \"last-op\": ").append(lastOp < 0 ? "null" : Integer.toString(lastOp));
        b.append(", \"pending\": ").append(pending);
        b.append(", \"pending-count\": ").append(pendingCount).append('}');
        configJson.add(b.toString());
    }

    void writeTo(StringBuilder b, long nanos, long cpuNanos) {
        b.append("{\"valid\": ").append(valid);
        if (cause != null) {
            b.append(", \"cause\": ");
            Json.quote(b, cause);
            b.append(", \"detail\": ");
            Json.quote(b, detail);
        }
        if (failingOp >= 0) {
            b.append(", \"op\": ").append(failingOp);
            b.append(", \"configs\": [").append(String.join(", ", configJson)).append(']');
        }
        b.append(", \"configs-explored\": ").append(configs);
        b.append(", \"steps\": ").append(steps);
        b.append(", \"nanos\": ").append(nanos);
        b.append(", \"cpu-nanos\": ").append(cpuNanos).append('}');
    }
}
