package chaos.lin;

import java.util.ArrayList;
import java.util.List;

/**
 * Reads a batch of histories from one string: one JPype call per batch
 * instead of one per op. Layout (whitespace separated ints unless noted):
 *
 * <pre>
 * batch COUNT DEADLINE_MS                 (DEADLINE_MS &lt;= 0: none)
 * history GROUP MODEL TIME_LIMIT_MS MAX_CONFIGS MEMORY_BUDGET_BYTES   (same GROUP: parts of one history)
 * values K \n then K lines of JSON, one value each (id = line number)
 * init M ids...
 * aux M ids...
 * ops N \n then N times: CALL RET F NIN in... NOUT out...   (RET -1: info; NOUT -1: unknown)
 * </pre>
 */
final class Wire {
    private final String s;
    private int i;

    Wire(String s) {
        this.s = s;
    }

    static final class Batch {
        final long deadlineMillis;
        final List<History> histories;

        Batch(long deadlineMillis, List<History> histories) {
            this.deadlineMillis = deadlineMillis;
            this.histories = histories;
        }
    }

    Batch read() {
        expect("batch");
        int count = readInt();
        long deadline = readLong();
        List<History> out = new ArrayList<>(count);
        for (int k = 0; k < count; k++) {
            out.add(readHistory());
        }
        return new Batch(deadline, out);
    }

    private History readHistory() {
        expect("history");
        int group = readInt();
        String model = word();
        long limitMs = readLong();
        long maxConfigs = readLong();
        long budget = readLong();
        expect("values");
        int k = readInt();
        skipLineEnd();
        String[] values = new String[k];
        for (int v = 0; v < k; v++) {
            int end = s.indexOf('\n', i);
            values[v] = s.substring(i, end);
            i = end + 1;
        }
        expect("init");
        int[] init = readInts(readInt());
        expect("aux");
        int[] aux = readInts(readInt());
        expect("ops");
        int n = readInt();
        int[] call = new int[n], ret = new int[n], f = new int[n];
        int[] inOff = new int[n], inLen = new int[n], outOff = new int[n], outLen = new int[n];
        int[] data = new int[Math.max(16, 4 * n)];
        int used = 0;
        for (int o = 0; o < n; o++) {
            call[o] = readInt();
            ret[o] = readInt();
            f[o] = readInt();
            for (int pass = 0; pass < 2; pass++) {
                int len = readInt();
                if (pass == 0) {
                    inOff[o] = used;
                    inLen[o] = len;
                } else {
                    outOff[o] = used;
                    outLen[o] = len;
                }
                if (len > 0) {
                    if (used + len > data.length) {
                        data = java.util.Arrays.copyOf(data, Math.max(2 * data.length, used + len));
                    }
                    for (int j = 0; j < len; j++) {
                        data[used++] = readInt();
                    }
                }
            }
        }
        return new History(model, values, init, aux, n, call, ret, f, inOff, inLen, outOff, outLen,
                data, limitMs > 0 ? limitMs * 1_000_000L : 0, maxConfigs, budget, group);
    }

    private int[] readInts(int m) {
        int[] a = new int[m];
        for (int j = 0; j < m; j++) {
            a[j] = readInt();
        }
        return a;
    }

    private void skipSpace() {
        while (i < s.length() && s.charAt(i) <= ' ') {
            i++;
        }
    }

    private void skipLineEnd() {
        while (s.charAt(i) != '\n') {
            i++;
        }
        i++;
    }

    private String word() {
        skipSpace();
        int start = i;
        while (i < s.length() && s.charAt(i) > ' ') {
            i++;
        }
        return s.substring(start, i);
    }

    private void expect(String w) {
        String got = word();
        if (!got.equals(w)) {
            throw new IllegalArgumentException("wire format: expected " + w + " at " + i + ", got " + got);
        }
    }

    private int readInt() {
        return (int) readLong();
    }

    private long readLong() {
        skipSpace();
        boolean neg = false;
        if (s.charAt(i) == '-') {
            neg = true;
            i++;
        }
        long v = 0;
        int start = i;
        while (i < s.length()) {
            char c = s.charAt(i);
            if (c < '0' || c > '9') {
                break;
            }
            v = v * 10 + (c - '0');
            i++;
        }
        if (i == start) {
            throw new IllegalArgumentException("wire format: expected a number at " + i);
        }
        return neg ? -v : v;
    }
}
