package io.bloomguard;

import java.nio.charset.StandardCharsets;
import java.util.List;

/** Argument checks and UTF-8 encoding (Redisson's StringCodec) of items, names and URLs. */
final class Items {
    private Items() {}

    static byte[] item(byte[] item, String what) {
        if (item == null)
            throw new NullPointerException(what + ": the item is null");
        return item;
    }

    static byte[] item(String item, String what) {
        if (item == null)
            throw new NullPointerException(what + ": the item is null");
        return item.getBytes(StandardCharsets.UTF_8);
    }

    static byte[][] strings(List<String> items, String what) {
        if (items == null)
            throw new NullPointerException(what + ": the list of items is null");
        Object[] a = items.toArray();
        byte[][] out = new byte[a.length][];
        for (int i = 0; i < a.length; i++) {
            if (a[i] == null)
                throw new NullPointerException(what + ": item " + i + " of the list is null");
            out[i] = ((String) a[i]).getBytes(StandardCharsets.UTF_8);
        }
        return out;
    }

    static byte[][] bytes(List<byte[]> items, String what) {
        if (items == null)
            throw new NullPointerException(what + ": the list of items is null");
        Object[] a = items.toArray();
        byte[][] out = new byte[a.length][];
        for (int i = 0; i < a.length; i++) {
            if (a[i] == null)
                throw new NullPointerException(what + ": item " + i + " of the list is null");
            out[i] = (byte[]) a[i];
        }
        return out;
    }

    /** A name or URL for C: UTF-8, no NUL byte (C would cut it there). */
    static byte[] cstring(String s, String what) {
        if (s == null)
            throw new NullPointerException(what + " is null");
        if (s.indexOf('\0') >= 0)
            throw new IllegalArgumentException(what + " contains a NUL character, which Redis names and URLs "
                                               + "cannot carry through the C library");
        return s.getBytes(StandardCharsets.UTF_8);
    }
}
