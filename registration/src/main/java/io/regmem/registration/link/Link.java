package io.regmem.registration.link;

import static io.regmem.registration.CmId.MAX_ACCEPT_PRIVATE_DATA;
import static io.regmem.registration.CmId.MAX_CONNECT_PRIVATE_DATA;
import static io.regmem.registration.CmId.MAX_REJECT_PRIVATE_DATA;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import java.io.IOException;
import java.net.ConnectException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.net.UnknownHostException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.util.Arrays;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * The bootstrap connection between two processes for one CM connection, the same for every provider
 * that connects processes (ucx, shm): a TCP socket that carries an authenticated handshake (the
 * transport's addresses, QP numbers, connection tokens, private data) and
 * then stays open as the connection's life line. Closing it is the disconnect; its end (EOF or
 * reset, which the kernel also delivers when the peer process dies, SIGKILL included) tells the
 * other side that its peer is gone.
 *
 * <p>The handshake proves to each side that the other holds the same secret ({@link Secret}),
 * with fresh random challenges so that nothing recorded can be replayed, before any byte of it
 * reaches the transport: a UCX worker address goes to {@code ucp_ep_create}, an shm lane offer to the
 * lane's setup, only once its message's HMAC checked.
 * Every length is checked against its bound before anything is read or allocated from it, and the
 * whole handshake has one deadline, however slowly the peer trickles its bytes. Messages, big-endian:
 * <pre>
 * CHALLENGE  listener to requester, first:  magic u32 "RMCM", version u16, listener nonce [16]
 * HELLO      requester: magic u32, version u16, requester nonce [16], QP u32, token u64,
 *            address length u32 (1..65536), private length u16 (0..56), address [n], private [n],
 *            HMAC-SHA256 [32] of "regmem hello" + listener nonce + every byte above
 * ACCEPT     listener: type u8 = 1, QP u32, token u64, address length u32, private length u16 (0..196),
 *            address, private, HMAC of "regmem accept" + requester nonce + listener nonce + the bytes above
 * REJECT     listener: type u8 = 2, private length u16 (0..148), private,
 *            HMAC of "regmem reject" + requester nonce + listener nonce + the bytes above
 * READY      requester: type u8 = 3, HMAC of "regmem ready" + listener nonce + requester nonce
 * NO_LANE    requester, instead of READY when the ACCEPT offered a same-host lane it could not set up:
 *            type u8 = 4, HMAC of "regmem no lane" + listener nonce + requester nonce; the listener then
 *            answers a second ACCEPT over its transport and the requester a READY
 * REFUSED    listener, instead of ACCEPT or REJECT when it cannot take the HELLO: type u8 = 5, reason u8
 *            ({@link Refusal}); not authenticated, a hint for the requester's error message only
 * </pre>
 * The address is the transport's (a UCX worker address; an shm lane offer), opaque here: its
 * provider reads it, once authenticated, and refuses one that is not its own.
 * A message that is not what the step expects, too long, damaged or not authentic ends the
 * handshake with {@link IOException} (its message says which rule failed); the socket is closed.
 */
public final class Link implements AutoCloseable {
    public static final int MAGIC = 0x524D_434D; // "RMCM"
    public static final short VERSION = 2;
    public static final byte ACCEPT = 1;
    public static final byte REJECT = 2;
    public static final byte READY = 3;
    public static final byte NO_LANE = 4;
    public static final byte REFUSED = 5;
    public static final int NONCE = 16;
    public static final int MAC = 32;
    /** The longest transport address taken: UCX's worker addresses are hundreds of bytes (more with many NICs). */
    public static final int MAX_ADDRESS = 65536;
    /** How long a whole handshake may take by default (connect, challenge, hello; accept, ready). */
    public static final int HANDSHAKE_MILLIS = 10_000;
    private static final SecureRandom RANDOM = new SecureRandom();

    private final LinkSocket wire;
    private final int timeoutMillis;
    private final SecretKeySpec key;
    /** The listener's and the requester's challenges (this side made one, the other side sent one). */
    private byte[] listenerNonce;
    private byte[] requesterNonce;

    /** What a HELLO or ACCEPT carries: the sender's QP number, connection token, transport address and private data. */
    public record Peer(int qp, long token, byte[] address, byte[] privateData) {
    }

    /**
     * Who speaks: the provider's name and what its address is called, for messages ("not a regmem
     * ucx peer", "worker address of 70000 bytes").
     */
    public record Kind(String provider, String addressName) {
    }

    private final Kind kind;

    /** TCP keepalive on the life line: probes after 5 s of silence, every 1 s, 3 unanswered end it. */
    public static final int KEEPALIVE_IDLE_SECONDS = LinkSocket.KEEPALIVE_IDLE_SECONDS;
    public static final int KEEPALIVE_INTERVAL_SECONDS = LinkSocket.KEEPALIVE_INTERVAL_SECONDS;
    public static final int KEEPALIVE_PROBES = LinkSocket.KEEPALIVE_PROBES;

    /**
     * @param secret        the handshake's secret (null: the link only carries a life line, for tests)
     * @param timeoutMillis how long each half of the handshake may take
     * @param kind          who speaks, for messages
     */
    public Link(Socket socket, byte[] secret, int timeoutMillis, Kind kind) throws IOException {
        this.wire = new LinkSocket(socket, timeoutMillis);
        this.kind = kind;
        this.timeoutMillis = timeoutMillis;
        this.key = secret == null ? null : new SecretKeySpec(secret, "HmacSHA256");
    }

    /**
     * Connects to the listener at {@code host:port}.
     *
     * @throws RdmaException {@link Errno#ECONNREFUSED} if nobody listens there; {@link Errno#EINVAL} for a host
     *                       that does not resolve; {@link Errno#ETIMEDOUT} if the connect takes too long
     */
    public static Link connect(String who, Kind kind, String host, int port, byte[] secret, int timeoutMillis) {
        Socket s = new Socket();
        try {
            s.connect(new InetSocketAddress(host, port), timeoutMillis);
            return new Link(s, secret, timeoutMillis, kind);
        } catch (UnknownHostException e) {
            LinkSocket.closeQuietly(s);
            throw new RdmaException(Errno.EINVAL, who + ": unknown host '" + host + "'", e);
        } catch (ConnectException e) {
            LinkSocket.closeQuietly(s);
            throw new RdmaException(Errno.ECONNREFUSED, who + ": nobody listens at '" + host + ":" + port + "' ("
                    + e.getMessage() + ")", e);
        } catch (SocketTimeoutException e) {
            LinkSocket.closeQuietly(s);
            throw new RdmaException(Errno.ETIMEDOUT, who + ": no answer from '" + host + ":" + port + "' within "
                    + timeoutMillis + " ms", e);
        } catch (IOException e) {
            LinkSocket.closeQuietly(s);
            throw new RdmaException(Errno.EIO, who + ": cannot reach '" + host + ":" + port + "': " + e.getMessage(), e);
        }
    }

    /** This end's {@code ip:port} (the requester's: the source the listener sees as its peer). */
    public String localAddress() {
        return wire.localAddress();
    }

    /** The peer's {@code ip:port}. */
    public String peerAddress() {
        return wire.peerAddress();
    }

    /** A deadline {@code timeoutMillis} from now, for one half of the handshake. */
    public long deadline() {
        return System.nanoTime() + timeoutMillis * 1_000_000L;
    }

    // ---- the listener's side ----

    /** Sends the listener's challenge (the first message on a new connection). */
    public void sendChallenge() throws IOException {
        listenerNonce = nonce();
        ByteBuffer b = ByteBuffer.allocate(6 + NONCE);
        b.putInt(MAGIC).putShort(VERSION).put(listenerNonce);
        wire.write(b.array());
    }

    /** Reads and authenticates the requester's HELLO: only then is anything of it used. */
    public Peer readHello(long deadline) throws IOException {
        byte[] fixed = new byte[4 + 2 + NONCE + 4 + 8 + 4 + 2];
        wire.readFully(fixed, deadline, "HELLO");
        ByteBuffer f = ByteBuffer.wrap(fixed);
        if (f.getInt() != MAGIC) {
            throw new Refusal.Refused(Refusal.MALFORMED, "not a regmem " + kind.provider() + " peer (bad magic)");
        }
        short v = f.getShort();
        if (v != VERSION) {
            throw new Refusal.Refused(Refusal.ANOTHER_VERSION, "the peer speaks handshake version " + v + ", this is version "
                    + VERSION);
        }
        byte[] nonce = new byte[NONCE];
        f.get(nonce);
        int qp = f.getInt();
        long token = f.getLong();
        int addressLength = f.getInt();
        int privateLength = Short.toUnsignedInt(f.getShort());
        checkLength(kind.addressName(), addressLength, 1, MAX_ADDRESS);
        checkLength("private data", privateLength, 0, MAX_CONNECT_PRIVATE_DATA);
        byte[] address = new byte[addressLength];
        byte[] data = new byte[privateLength];
        byte[] mac = new byte[MAC];
        wire.readFully(address, deadline, "HELLO");
        wire.readFully(data, deadline, "HELLO");
        wire.readFully(mac, deadline, "HELLO");
        try {
            verify(mac, "HELLO", "regmem hello", listenerNonce, fixed, address, data);
        } catch (IOException e) {
            throw new Refusal.Refused(Refusal.SECRET_DIFFERS, e.getMessage());
        }
        requesterNonce = nonce;
        if (qp < 0) {
            throw new IOException("HELLO names QP " + qp);
        }
        return new Peer(qp, token, address, data);
    }

    /** Answers ACCEPT: this side's QP, token, transport address and private data. */
    public void sendAccept(int qp, long token, byte[] address, byte[] privateData) throws IOException {
        ByteBuffer b = ByteBuffer.allocate(1 + 4 + 8 + 4 + 2 + address.length + privateData.length + MAC);
        b.put(ACCEPT).putInt(qp).putLong(token).putInt(address.length).putShort((short) privateData.length)
                .put(address).put(privateData);
        sendSigned(b, "regmem accept", requesterNonce, listenerNonce);
    }

    /** Answers REJECT with {@code privateData}. */
    public void sendReject(byte[] privateData) throws IOException {
        ByteBuffer b = ByteBuffer.allocate(1 + 2 + privateData.length + MAC);
        b.put(REJECT).putShort((short) privateData.length).put(privateData);
        sendSigned(b, "regmem reject", requesterNonce, listenerNonce);
    }

    /**
     * Tells the requester why its HELLO is refused (REFUSED), instead of an answer; the caller closes
     * the link then. Quiet if the requester is gone.
     */
    public void sendRefused(Refusal why) {
        try {
            wire.write(new byte[] {REFUSED, (byte) why.code});
        } catch (IOException gone) {
            // nobody to tell
        }
    }

    /**
     * Waits for the requester's authenticated READY, running {@code progress} every few milliseconds
     * (the worker must answer the requester's wire-up meanwhile).
     *
     * @throws SocketTimeoutException if it does not come by {@code deadline}
     */
    public void awaitReady(long deadline, Runnable progress) throws IOException {
        int type = wire.readType(deadline, progress);
        if (type != READY) {
            throw new IOException(type < 0 ? "the requester closed the connection before READY"
                    : "message type " + type + " where READY was due");
        }
        byte[] mac = new byte[MAC];
        wire.readFully(mac, deadline, "READY");
        verify(mac, "READY", "regmem ready", listenerNonce, requesterNonce, new byte[] {READY});
    }

    /**
     * Waits for the requester's authenticated READY or NO_LANE (after an ACCEPT that offered a
     * same-host lane), running {@code progress} every few milliseconds.
     *
     * @return true for READY, false for NO_LANE
     * @throws SocketTimeoutException if neither comes by {@code deadline}
     */
    public boolean awaitReadyOrNoLane(long deadline, Runnable progress) throws IOException {
        int type = wire.readType(deadline, progress);
        if (type != READY && type != NO_LANE) {
            throw new IOException(type < 0 ? "the requester closed the connection before READY"
                    : "message type " + type + " where READY or NO_LANE was due");
        }
        byte[] mac = new byte[MAC];
        wire.readFully(mac, deadline, type == READY ? "READY" : "NO_LANE");
        if (type == READY) {
            verify(mac, "READY", "regmem ready", listenerNonce, requesterNonce, new byte[] {READY});
        } else {
            verify(mac, "NO_LANE", "regmem no lane", listenerNonce, requesterNonce, new byte[] {NO_LANE});
        }
        return type == READY;
    }

    // ---- the requester's side ----

    /** Reads the listener's challenge. */
    public void readChallenge(long deadline) throws IOException {
        byte[] b = new byte[6 + NONCE];
        wire.readFully(b, deadline, "CHALLENGE");
        ByteBuffer f = ByteBuffer.wrap(b);
        if (f.getInt() != MAGIC) {
            throw new IOException("not a regmem " + kind.provider() + " listener (bad magic)");
        }
        short v = f.getShort();
        if (v != VERSION) {
            throw new IOException("the listener speaks handshake version " + v + ", this is version " + VERSION);
        }
        listenerNonce = new byte[NONCE];
        f.get(listenerNonce);
    }

    /** Sends HELLO: this side's QP, token, transport address and private data, signed. */
    public void sendHello(int qp, long token, byte[] address, byte[] privateData) throws IOException {
        requesterNonce = nonce();
        ByteBuffer b = ByteBuffer.allocate(4 + 2 + NONCE + 4 + 8 + 4 + 2 + address.length + privateData.length + MAC);
        b.putInt(MAGIC).putShort(VERSION).put(requesterNonce).putInt(qp).putLong(token).putInt(address.length)
                .putShort((short) privateData.length).put(address).put(privateData);
        sendSigned(b, "regmem hello", listenerNonce);
    }

    /** The listener's answer: an authenticated ACCEPT (a Peer) or REJECT (its private data, as {@link Rejected}). */
    public Object readAnswer(long deadline, Runnable progress) throws IOException {
        int type = wire.readType(deadline, progress);
        if (type == ACCEPT) {
            byte[] fixed = new byte[4 + 8 + 4 + 2];
            wire.readFully(fixed, deadline, "ACCEPT");
            ByteBuffer f = ByteBuffer.wrap(fixed);
            int qp = f.getInt();
            long token = f.getLong();
            int addressLength = f.getInt();
            int privateLength = Short.toUnsignedInt(f.getShort());
            checkLength(kind.addressName(), addressLength, 1, MAX_ADDRESS);
            checkLength("private data", privateLength, 0, MAX_ACCEPT_PRIVATE_DATA);
            byte[] address = new byte[addressLength];
            byte[] data = new byte[privateLength];
            byte[] mac = new byte[MAC];
            wire.readFully(address, deadline, "ACCEPT");
            wire.readFully(data, deadline, "ACCEPT");
            wire.readFully(mac, deadline, "ACCEPT");
            verify(mac, "ACCEPT", "regmem accept", requesterNonce, listenerNonce, new byte[] {ACCEPT}, fixed, address, data);
            if (qp < 0) {
                throw new IOException("ACCEPT names QP " + qp);
            }
            return new Peer(qp, token, address, data);
        }
        if (type == REJECT) {
            byte[] length = new byte[2];
            wire.readFully(length, deadline, "REJECT");
            int privateLength = Short.toUnsignedInt(ByteBuffer.wrap(length).getShort());
            checkLength("private data", privateLength, 0, MAX_REJECT_PRIVATE_DATA);
            byte[] data = new byte[privateLength];
            byte[] mac = new byte[MAC];
            wire.readFully(data, deadline, "REJECT");
            wire.readFully(mac, deadline, "REJECT");
            verify(mac, "REJECT", "regmem reject", requesterNonce, listenerNonce, new byte[] {REJECT}, length, data);
            return new Rejected(data);
        }
        if (type == REFUSED) {
            byte[] code = new byte[1];
            wire.readFully(code, deadline, "REFUSED");
            Refusal r = Refusal.of(code[0]);
            throw new Refusal.Heard("the listener at " + peerAddress() + " refused the connection: "
                    + (r != null ? r.meaning() : "reason " + code[0] + " (unknown to this side)"));
        }
        throw new IOException(type < 0 ? "the listener at " + peerAddress() + " closed the connection without an answer"
                : "message type " + type + " where ACCEPT or REJECT was due");
    }

    /** An authenticated REJECT. */
    public record Rejected(byte[] privateData) {
    }

    /** Sends READY, signed. */
    public void sendReady() throws IOException {
        ByteBuffer b = ByteBuffer.allocate(1 + MAC);
        b.put(READY);
        byte[] mac = mac("regmem ready", listenerNonce, requesterNonce, new byte[] {READY});
        b.put(mac);
        wire.write(b.array());
    }

    /** Sends NO_LANE, signed: the same-host lane the ACCEPT offered could not be set up here. */
    public void sendNoLane() throws IOException {
        ByteBuffer b = ByteBuffer.allocate(1 + MAC);
        b.put(NO_LANE);
        b.put(mac("regmem no lane", listenerNonce, requesterNonce, new byte[] {NO_LANE}));
        wire.write(b.array());
    }

    // ---- the wire ----

    private static void checkLength(String what, int n, int min, int max) throws IOException {
        if (n < min || n > max) {
            throw new IOException(what + " of " + n + " bytes (" + min + " to " + max + ")");
        }
    }

    private void sendSigned(ByteBuffer b, String label, byte[]... context) throws IOException {
        int body = b.position();
        byte[][] parts = new byte[context.length + 1][];
        System.arraycopy(context, 0, parts, 0, context.length);
        parts[context.length] = Arrays.copyOf(b.array(), body);
        b.put(mac(label, parts));
        wire.write(b.array());
    }

    private void verify(byte[] mac, String message, String label, byte[]... parts) throws IOException {
        if (!MessageDigest.isEqual(mac, mac(label, parts))) {
            throw new IOException(message + " is not authentic (its HMAC does not match this side's secret)");
        }
    }

    private byte[] mac(String label, byte[]... parts) {
        if (key == null) {
            throw new IllegalStateException("a link without a secret carries no handshake");
        }
        try {
            Mac m = Mac.getInstance("HmacSHA256");
            m.init(key);
            m.update(label.getBytes(StandardCharsets.US_ASCII));
            for (byte[] p : parts) {
                m.update(p);
            }
            return m.doFinal();
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("HmacSHA256 is part of every JDK", e);
        }
    }

    private static byte[] nonce() {
        byte[] n = new byte[NONCE];
        RANDOM.nextBytes(n);
        return n;
    }

    /** A random connection token (never 0: 0 marks "none"). */
    public static long token() {
        long t;
        do {
            t = RANDOM.nextLong();
        } while (t == 0);
        return t;
    }

    /**
     * Blocks until the peer closes the connection or goes away (no timeout): the connection's life
     * line. Returns normally in both cases.
     */
    public void awaitEnd() {
        wire.awaitEnd();
    }

    /** The socket's keepalive settings: on, idle seconds, interval seconds, probes (for tests). */
    public int[] keepalive() throws IOException {
        return wire.keepalive();
    }

    /**
     * True if the peer has closed its end of the connection (or it was reset): a look that waits at
     * most a millisecond. A byte that came meanwhile is kept for the next read.
     */
    public boolean peerClosed() {
        return wire.peerClosed();
    }

    /**
     * True if the peer closed its end of the connection or sent something ({@link #peerClosed()}): a
     * listener waiting for the requester to take a same-host lane stops waiting then.
     */
    public boolean peerClosedOrSent() {
        return wire.peerClosedOrSent();
    }

    @Override
    public void close() {
        wire.close();
    }
}
