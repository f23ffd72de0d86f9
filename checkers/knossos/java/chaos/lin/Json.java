package chaos.lin;

/** The little JSON the engine needs: quoting strings for results, unquoting string values. */
final class Json {
    private Json() {
    }

    static String quote(String s) {
        StringBuilder b = new StringBuilder(s.length() + 2);
        quote(b, s);
        return b.toString();
    }

    static void quote(StringBuilder b, String s) {
        b.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': b.append("\\\""); break;
                case '\\': b.append("\\\\"); break;
                case '\n': b.append("\\n"); break;
                case '\r': b.append("\\r"); break;
                case '\t': b.append("\\t"); break;
                default:
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
            }
        }
        b.append('"');
    }

    /**
     * Decodes a JSON string literal as Python's json.dumps writes it. Anything
     * that is not a string literal (null, a number) reads as its JSON text,
     * except null which reads as "" (an absent key reads as empty, as in
     * Porcupine's key-value model).
     */
    static String decodeString(String json) {
        if (json.equals("null")) {
            return "";
        }
        if (json.isEmpty() || json.charAt(0) != '"') {
            return json;
        }
        StringBuilder b = new StringBuilder(json.length());
        for (int i = 1; i < json.length() - 1; i++) {
            char c = json.charAt(i);
            if (c != '\\') {
                b.append(c);
                continue;
            }
            char e = json.charAt(++i);
            switch (e) {
                case 'n': b.append('\n'); break;
                case 'r': b.append('\r'); break;
                case 't': b.append('\t'); break;
                case 'b': b.append('\b'); break;
                case 'f': b.append('\f'); break;
                case 'u':
                    b.append((char) Integer.parseInt(json.substring(i + 1, i + 5), 16));
                    i += 4;
                    break;
                default: b.append(e);
            }
        }
        return b.toString();
    }
}
