package io.bloomguard;

import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.function.BiFunction;

/**
 * A bloomguard call failed. {@link #code()} is the C library's status (a negative {@code BG_E*}
 * value of {@code bloomguard/errors.h}); {@link #getMessage()} the library's message for this very
 * call, falling back to the code's static description when there is none.
 *
 * <p>Each status has a subclass nested here ({@link NotInitialized}, {@link Timeout}, ...), so a
 * caller catches the failures it handles by type. A status this binding does not know (a newer
 * library) is thrown as a plain {@code BloomGuardException} carrying the number.
 */
public class BloomGuardException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final int code;

    BloomGuardException(int code, String message) {
        super(message == null || message.isEmpty() ? describe(code) : message);
        this.code = code;
    }

    /** The C status code ({@code BG_ENOTINIT} is -12, ...). */
    public int code() {
        return code;
    }

    /** The status's macro name as errors.h spells it ("BG_ENOTINIT"), or "BG_STATUS(n)". */
    public String statusName() {
        Entry e = TABLE.get(code);
        return e != null ? e.name : "BG_STATUS(" + code + ")";
    }

    private static String describe(int code) {
        // the library's static text (bg_strerror) when it is loaded: errors.h stays its one home
        return NativeLoader.isLoaded() ? Native.strerror(code) : "bloomguard status " + code;
    }

    /** Called by the native code (bgjni_util.c): the exception for a status and its UTF-8 message. */
    static BloomGuardException of(int code, byte[] utf8Message) {
        return create(code, utf8Message == null ? "" : new String(utf8Message, StandardCharsets.UTF_8));
    }

    static BloomGuardException create(int code, String message) {
        Entry e = TABLE.get(code);
        return e != null ? e.make.apply(code, message) : new BloomGuardException(code, message);
    }

    private static final class Entry {
        final String name;
        final BiFunction<Integer, String, BloomGuardException> make;

        Entry(String name, BiFunction<Integer, String, BloomGuardException> make) {
            this.name = name;
            this.make = make;
        }
    }

    private static Map.Entry<Integer, Entry> e(int code, String name,
                                               BiFunction<Integer, String, BloomGuardException> make) {
        return Map.entry(code, new Entry(name, make));
    }

    /* The one table: status -> errors.h's name, class. Tests check it against the library. */
    private static final Map<Integer, Entry> TABLE = Map.ofEntries(
        e(-1, "BG_EINVAL", InvalidArgument::new),
        e(-2, "BG_ENOMEM", OutOfMemory::new),
        e(-3, "BG_EBADURL", BadUrl::new),
        e(-4, "BG_EBADNAME", BadName::new),
        e(-5, "BG_EBADPARAMS", BadParams::new),
        e(-6, "BG_ENOTSUP", NotSupported::new),
        e(-7, "BG_ECONN", ConnectionFailed::new),
        e(-8, "BG_ETIMEOUT", Timeout::new),
        e(-9, "BG_EAUTH", AuthFailed::new),
        e(-10, "BG_ESERVER", ServerError::new),
        e(-11, "BG_EPROTO", ProtocolError::new),
        e(-12, "BG_ENOTINIT", NotInitialized::new),
        e(-13, "BG_ECONFIG", ConfigChanged::new),
        e(-14, "BG_ECORRUPT", Corrupt::new),
        e(-15, "BG_EWRONGTYPE", WrongType::new),
        e(-16, "BG_ELOCKED", Locked::new),
        e(-17, "BG_EROTATING", RotationInProgress::new),
        e(-18, "BG_EABORTED", Aborted::new),
        e(-19, "BG_ECLOSED", Closed::new),
        e(-20, "BG_ECANCELED", Canceled::new),
        e(-21, "BG_ETLS", TlsFailed::new),
        e(-22, "BG_EFULL", Full::new));

    /** BG_EINVAL: an argument the library refused. */
    public static class InvalidArgument extends BloomGuardException {
        private static final long serialVersionUID = 1L;
        InvalidArgument(int code, String message) { super(code, message); }
    }

    /** BG_ENOMEM. */
    public static class OutOfMemory extends BloomGuardException {
        private static final long serialVersionUID = 1L;
        OutOfMemory(int code, String message) { super(code, message); }
    }

    /** BG_EBADURL: a malformed or unsupported server URL (the message names the part; never the password). */
    public static class BadUrl extends BloomGuardException {
        private static final long serialVersionUID = 1L;
        BadUrl(int code, String message) { super(code, message); }
    }

    /** BG_EBADNAME: a filter name whose keys would land on two cluster slots (Redisson would split it). */
    public static class BadName extends BloomGuardException {
        private static final long serialVersionUID = 1L;
        BadName(int code, String message) { super(code, message); }
    }

    /** BG_EBADPARAMS: (expected insertions, false probability) rejected by Redisson's rules. */
    public static class BadParams extends BloomGuardException {
        private static final long serialVersionUID = 1L;
        BadParams(int code, String message) { super(code, message); }
    }

    /** BG_ENOTSUP: an unsupported feature (also: no native library for this platform). */
    public static class NotSupported extends BloomGuardException {
        private static final long serialVersionUID = 1L;
        NotSupported(int code, String message) { super(code, message); }
    }

    /** BG_ECONN: cannot connect, or the connection was lost. */
    public static class ConnectionFailed extends BloomGuardException {
        private static final long serialVersionUID = 1L;
        ConnectionFailed(int code, String message) { super(code, message); }
    }

    /** BG_ETIMEOUT. */
    public static class Timeout extends BloomGuardException {
        private static final long serialVersionUID = 1L;
        Timeout(int code, String message) { super(code, message); }
    }

    /** BG_EAUTH. */
    public static class AuthFailed extends BloomGuardException {
        private static final long serialVersionUID = 1L;
        AuthFailed(int code, String message) { super(code, message); }
    }

    /** BG_ESERVER: the server answered an error (OOM, READONLY, ...). */
    public static class ServerError extends BloomGuardException {
        private static final long serialVersionUID = 1L;
        ServerError(int code, String message) { super(code, message); }
    }

    /** BG_EPROTO. */
    public static class ProtocolError extends BloomGuardException {
        private static final long serialVersionUID = 1L;
        ProtocolError(int code, String message) { super(code, message); }
    }

    /** BG_ENOTINIT: the filter has no config hash (never initialized, or deleted). */
    public static class NotInitialized extends BloomGuardException {
        private static final long serialVersionUID = 1L;
        NotInitialized(int code, String message) { super(code, message); }
    }

    /** BG_ECONFIG: the filter's config kept changing during the call. */
    public static class ConfigChanged extends BloomGuardException {
        private static final long serialVersionUID = 1L;
        ConfigChanged(int code, String message) { super(code, message); }
    }

    /** BG_ECORRUPT. */
    public static class Corrupt extends BloomGuardException {
        private static final long serialVersionUID = 1L;
        Corrupt(int code, String message) { super(code, message); }
    }

    /** BG_EWRONGTYPE. */
    public static class WrongType extends BloomGuardException {
        private static final long serialVersionUID = 1L;
        WrongType(int code, String message) { super(code, message); }
    }

    /** BG_ELOCKED: the filter's write lock was held past the wait. */
    public static class Locked extends BloomGuardException {
        private static final long serialVersionUID = 1L;
        Locked(int code, String message) { super(code, message); }
    }

    /** BG_EROTATING: another rotation of this filter is in progress. */
    public static class RotationInProgress extends BloomGuardException {
        private static final long serialVersionUID = 1L;
        RotationInProgress(int code, String message) { super(code, message); }
    }

    /** BG_EABORTED. */
    public static class Aborted extends BloomGuardException {
        private static final long serialVersionUID = 1L;
        Aborted(int code, String message) { super(code, message); }
    }

    /** BG_ECLOSED: the handle (client, filter, rotation) was closed. */
    public static class Closed extends BloomGuardException {
        private static final long serialVersionUID = 1L;
        Closed(int code, String message) { super(code, message); }
    }

    /** BG_ECANCELED. */
    public static class Canceled extends BloomGuardException {
        private static final long serialVersionUID = 1L;
        Canceled(int code, String message) { super(code, message); }
    }

    /** BG_ETLS. */
    public static class TlsFailed extends BloomGuardException {
        private static final long serialVersionUID = 1L;
        TlsFailed(int code, String message) { super(code, message); }
    }

    /** BG_EFULL. */
    public static class Full extends BloomGuardException {
        private static final long serialVersionUID = 1L;
        Full(int code, String message) { super(code, message); }
    }

    /** No native library in the jar fits this platform (a BG_ENOTSUP): the message says what to do. */
    public static final class UnsupportedPlatform extends NotSupported {
        private static final long serialVersionUID = 1L;
        UnsupportedPlatform(String message) { super(-6, message); }
    }
}
