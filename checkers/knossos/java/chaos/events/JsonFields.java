package chaos.events;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import org.apache.spark.sql.api.java.UDF2;

/**
 * Top-level fields of a JSON object, as text: what Spark's json_tuple gives
 * (strings without their quotes, numbers as their digits, objects and arrays
 * as their JSON), read from the value's bytes in one pass instead of through a
 * char reader per value. `names` is a comma-separated list; the result has one
 * entry per name (null when absent, null, or the value is not an object).
 */
public final class JsonFields implements UDF2<byte[], String, String[]> {
    @Override
    public String[] call(byte[] json, String names) {
        String[] wanted = names.split(",", -1);
        String[] found = new String[wanted.length];
        if (json == null) return found;
        try (JsonParser p = EventDecoder.FACTORY.createParser(json)) {
            if (p.nextToken() != JsonToken.START_OBJECT) return found;
            while (p.nextToken() == JsonToken.FIELD_NAME) {
                int slot = indexOf(wanted, p.currentName());
                JsonToken token = p.nextToken();
                if (slot < 0 || token == JsonToken.VALUE_NULL) {
                    p.skipChildren();
                } else {
                    found[slot] = token.isScalarValue() ? p.getText() : EventDecoder.rawText(p, json);
                }
            }
        } catch (Exception e) {
            return new String[wanted.length];
        }
        return found;
    }

    private static int indexOf(String[] names, String name) {
        for (int i = 0; i < names.length; i++) {
            if (names[i].equals(name)) return i;
        }
        return -1;
    }
}
