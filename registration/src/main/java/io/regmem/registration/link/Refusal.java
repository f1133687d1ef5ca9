package io.regmem.registration.link;

import java.io.IOException;

/**
 * Why a listener refused a HELLO before any application saw the request, as it tells the requester in
 * a REFUSED message ({@link Link#sendRefused}): a code, not authenticated (the listener could not
 * authenticate the requester, nor the requester the listener), which gives the requester's user a
 * reason to act on and an attacker nothing it did not know (that its HELLO was not taken).
 */
public enum Refusal {
    /** The HELLO's HMAC does not match the listener's secret. */
    SECRET_DIFFERS(1, "the two sides' connection secrets differ (give both the same secret: option secret or "
            + "secretFile, REGMEM_SECRET, or the same ~/.regmem/secret)"),
    /** The HELLO's transport address is not the listener's provider's. */
    ANOTHER_PROVIDER(2, "the listener serves another provider (connect with the provider it serves, e.g. "
            + "--provider shm against a regmem serve --provider shm)"),
    /** The requester speaks another handshake version. */
    ANOTHER_VERSION(3, "the listener speaks another handshake version (another regmem version)"),
    /** The HELLO broke the handshake's rules. */
    MALFORMED(4, "the listener found this side's HELLO malformed"),
    /** The listener's provider cannot reach this process (another host, another network namespace). */
    UNREACHABLE(5, "the listener's provider cannot reach this process (shm connects processes of one host and one "
            + "network namespace: use ucx otherwise)"),
    /** The listener's application destroyed the request, or stopped listening, before it answered. */
    WITHDRAWN(6, "the listener went away before its application answered the request"),
    /** The listener's ID is of the other port space (a UDP ID's request reached a TCP listener, or the reverse). */
    ANOTHER_PORT_SPACE(7, "the listener listens in the other port space (a UDP port space ID's request needs a UDP "
            + "listener, a TCP one's a TCP listener)");

    final int code;
    private final String meaning;

    Refusal(int code, String meaning) {
        this.code = code;
        this.meaning = meaning;
    }

    /** What the requester is told. */
    public String meaning() {
        return meaning;
    }

    /** The refusal of {@code code}, or null for a code this side does not know. */
    static Refusal of(int code) {
        for (Refusal r : values()) {
            if (r.code == code) {
                return r;
            }
        }
        return null;
    }

    /**
     * Why a provider refuses a HELLO's transport address that it could not read ({@code e} says why):
     * one of another provider (its magic is not this provider's), else malformed.
     */
    public static Refusal ofAddress(IOException e) {
        String m = e.getMessage();
        return m != null && m.contains("bad magic") ? ANOTHER_PROVIDER : MALFORMED;
    }

    /** The requester's side: the listener said it refused the request (a REFUSED message came, with its reason). */
    public static final class Heard extends IOException {
        /** The listener refused, as {@code message} says. */
        public Heard(String message) {
            super(message);
        }
    }

    /** A HELLO the listener refuses, and why: the listener sends the reason before it closes the link. */
    public static final class Refused extends IOException {
        private final Refusal reason;

        /** The HELLO is refused for {@code reason}; {@code message} is the listener's log line. */
        public Refused(Refusal reason, String message) {
            super(message);
            this.reason = reason;
        }

        /** Why, as the requester is told. */
        public Refusal reason() {
            return reason;
        }
    }
}
