package chaos.events;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF1;

/**
 * The items of a poll's value: array<struct<id,key,queue:string,offset:bigint>>,
 * as from_json reads that schema (an object counts as a list of one item, a
 * non-integer offset is null) but from the value's bytes in one pass. Null when
 * the value is not a list of objects: the queue checker counts the poll as
 * unreadable.
 */
public final class PollItems implements UDF1<byte[], List<Row>> {
    @Override
    public List<Row> call(byte[] json) {
        if (json == null) return null;
        try (JsonParser p = EventDecoder.FACTORY.createParser(json)) {
            JsonToken root = p.nextToken();
            List<Row> items = new ArrayList<>();
            if (root == JsonToken.START_OBJECT) {
                items.add(item(p, json));
                return items;
            }
            if (root != JsonToken.START_ARRAY) return null;
            JsonToken token;
            while ((token = p.nextToken()) != JsonToken.END_ARRAY) {
                if (token == JsonToken.VALUE_NULL) {
                    items.add(null);
                } else if (token == JsonToken.START_OBJECT) {
                    items.add(item(p, json));
                } else {
                    return null;
                }
            }
            return items;
        } catch (Exception e) {
            return null;
        }
    }

    /** One item; the parser is on its START_OBJECT and is left on its END_OBJECT. */
    private static Row item(JsonParser p, byte[] json) throws java.io.IOException {
        String id = null, key = null, queue = null;
        Long offset = null;
        while (p.nextToken() == JsonToken.FIELD_NAME) {
            String name = p.currentName();
            JsonToken token = p.nextToken();
            if (token == JsonToken.VALUE_NULL) continue;
            if (name.equals("offset")) {
                offset = EventDecoder.longValue(p);
                p.skipChildren();
                continue;
            }
            String text = token.isScalarValue() ? p.getText() : EventDecoder.rawText(p, json);
            switch (name) {
                case "id": id = text; break;
                case "key": key = text; break;
                case "queue": queue = text; break;
                default: break;
            }
        }
        return RowFactory.create(id, key, queue, offset);
    }
}
