package chaos.events;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.json.JsonReadFeature;
import java.nio.charset.StandardCharsets;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF1;

/**
 * One raw event line (UTF-8 bytes) to its fields, for checkers/parse.py.
 *
 * <p>Spark's from_json decodes a line through a char reader and rebuilds the value
 * as a variant, which the pipeline then prints back to JSON: most of the
 * reconstruction's time at 10 M events. This reads the bytes once with
 * Jackson's streaming parser and keeps the value as the exact text of the line.
 * Fields are read as from_json reads them into text (numbers as their digits,
 * objects and arrays as their JSON) and `time` as a long; `unreadable` is set
 * when the line is not a JSON object (no field is kept) or `time` is not a
 * 64-bit integer (the other fields are kept), so that the rules in parse.py
 * name the problem.
 */
public final class EventDecoder implements UDF1<byte[], Row> {
    static final JsonFactory FACTORY = JsonFactory.builder()
            .enable(JsonReadFeature.ALLOW_SINGLE_QUOTES)
            .enable(JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS)
            .build();
    private static final int PROCESS = 0, TYPE = 1, F = 2, KEY = 3, VALUE = 4, TIME = 5, NODE = 6, ERROR = 7;

    @Override
    public Row call(byte[] line) {
        Object[] fields = new Object[9];
        fields[8] = !read(line, fields);
        return RowFactory.create(fields);
    }

    /** Fills `fields`; false when the line is not an event object of readable types. */
    private static boolean read(byte[] line, Object[] fields) {
        if (line == null) return false;
        boolean readable = true;
        try (JsonParser p = FACTORY.createParser(line)) {
            if (p.nextToken() != JsonToken.START_OBJECT) return false;
            while (p.nextToken() == JsonToken.FIELD_NAME) {
                int slot = slot(p.currentName());
                JsonToken token = p.nextToken();
                if (slot < 0) {
                    p.skipChildren();
                } else if (token == JsonToken.VALUE_NULL) {
                    fields[slot] = null;
                } else if (slot == TIME) {
                    Long time = longValue(p);
                    readable &= time != null;
                    fields[TIME] = time;
                } else if (slot == VALUE || !token.isScalarValue()) {
                    fields[slot] = rawText(p, line);
                } else {
                    fields[slot] = p.getText();
                }
            }
            return readable && p.currentToken() == JsonToken.END_OBJECT;
        } catch (Exception e) {  // not JSON: nothing read from the line is kept
            java.util.Arrays.fill(fields, null);
            return false;
        }
    }

    /** The current value as a 64-bit integer, or null if it is anything else. */
    static Long longValue(JsonParser p) throws java.io.IOException {
        return p.currentToken() == JsonToken.VALUE_NUMBER_INT
                && p.getNumberType() != JsonParser.NumberType.BIG_INTEGER ? p.getLongValue() : null;
    }

    /** The exact text of the current value (object, array or scalar) in `line`. */
    static String rawText(JsonParser p, byte[] line) throws java.io.IOException {
        int start = (int) p.currentTokenLocation().getByteOffset();
        p.skipChildren();
        p.finishToken();
        int end = (int) p.currentLocation().getByteOffset();
        return new String(line, start, end - start, StandardCharsets.UTF_8);
    }

    private static int slot(String name) {
        switch (name) {
            case "process": return PROCESS;
            case "type": return TYPE;
            case "f": return F;
            case "key": return KEY;
            case "value": return VALUE;
            case "time": return TIME;
            case "node": return NODE;
            case "error": return ERROR;
            default: return -1;
        }
    }
}
