package io.regmem.registration.ucx;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.ConnectException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.net.UnknownHostException;

/**
 * The bootstrap connection between two processes for one CM connection: a TCP socket that carries
 * the handshake (worker addresses and QP numbers) and then stays open as the connection's life
 * line. Closing it is the disconnect; its end (EOF or reset, which the kernel also delivers when
 * the peer process dies, SIGKILL included) tells the other side that its peer is gone.
 *
 * <p>Messages, big-endian: HELLO = magic, version, QP number, worker address (length + bytes);
 * ACCEPT = type, QP number, worker address; REJECT = type; READY = type. Everything read is checked
 * (magic, version, lengths up to 64 KiB) before it is used; a peer that sends anything else is
 * treated as gone.
 */
final class UcxLink implements AutoCloseable {
    static final int MAGIC = 0x524D_434D; // "RMCM"
    static final short VERSION = 1;
    static final byte ACCEPT = 1;
    static final byte REJECT = 2;
    static final byte READY = 3;
    private static final int MAX_WORKER_ADDRESS = 65536;
    /** How long a handshake step may take (connect, each reply). */
    static final int HANDSHAKE_MILLIS = 10_000;

    private final Socket socket;
    private final DataInputStream in;
    private final DataOutputStream out;

    /** What a HELLO or ACCEPT carries. */
    record Peer(int qp, byte[] worker) {
    }

    /** TCP keepalive on the life line: probes after 5 s of silence, every 1 s, 3 unanswered end it. */
    static final int KEEPALIVE_IDLE_SECONDS = 5;
    static final int KEEPALIVE_INTERVAL_SECONDS = 1;
    static final int KEEPALIVE_PROBES = 3;

    UcxLink(Socket socket) throws IOException {
        this.socket = socket;
        socket.setTcpNoDelay(true);
        socket.setSoTimeout(HANDSHAKE_MILLIS);
        // A peer host that vanishes (power loss, a partition) sends no FIN: keepalive probes find
        // out within about 8 s and end the life line as a reset would.
        socket.setKeepAlive(true);
        try {
            socket.setOption(jdk.net.ExtendedSocketOptions.TCP_KEEPIDLE, KEEPALIVE_IDLE_SECONDS);
            socket.setOption(jdk.net.ExtendedSocketOptions.TCP_KEEPINTERVAL, KEEPALIVE_INTERVAL_SECONDS);
            socket.setOption(jdk.net.ExtendedSocketOptions.TCP_KEEPCOUNT, KEEPALIVE_PROBES);
        } catch (UnsupportedOperationException notHere) {
            // the platform's defaults (Linux: 2 hours) then
        }
        this.in = new DataInputStream(socket.getInputStream());
        this.out = new DataOutputStream(socket.getOutputStream());
    }

    /**
     * Connects to the listener at {@code host:port}.
     *
     * @throws RdmaException {@link Errno#ENOENT} if nobody listens there; {@link Errno#EINVAL} for a host
     *                       that does not resolve; {@link Errno#ETIMEDOUT} if the connect takes too long
     */
    static UcxLink connect(String who, String host, int port) {
        Socket s = new Socket();
        try {
            s.connect(new InetSocketAddress(host, port), HANDSHAKE_MILLIS);
            return new UcxLink(s);
        } catch (UnknownHostException e) {
            closeQuietly(s);
            throw new RdmaException(Errno.EINVAL, who + ": unknown host '" + host + "'", e);
        } catch (ConnectException e) {
            closeQuietly(s);
            throw new RdmaException(Errno.ENOENT, who + ": nobody listens at '" + host + ":" + port + "' ("
                    + e.getMessage() + ")", e);
        } catch (SocketTimeoutException e) {
            closeQuietly(s);
            throw new RdmaException(Errno.ETIMEDOUT, who + ": no answer from '" + host + ":" + port + "' within "
                    + HANDSHAKE_MILLIS + " ms", e);
        } catch (IOException e) {
            closeQuietly(s);
            throw new RdmaException(Errno.EIO, who + ": cannot reach '" + host + ":" + port + "': " + e.getMessage(), e);
        }
    }

    void sendHello(int qp, byte[] worker) throws IOException {
        out.writeInt(MAGIC);
        out.writeShort(VERSION);
        out.writeInt(qp);
        writeBytes(worker);
        out.flush();
    }

    Peer readHello() throws IOException {
        if (in.readInt() != MAGIC) {
            throw new IOException("not a regmem ucx peer (bad magic)");
        }
        short v = in.readShort();
        if (v != VERSION) {
            throw new IOException("peer speaks version " + v + ", this is version " + VERSION);
        }
        return new Peer(in.readInt(), readBytes());
    }

    void sendAccept(int qp, byte[] worker) throws IOException {
        out.writeByte(ACCEPT);
        out.writeInt(qp);
        writeBytes(worker);
        out.flush();
    }

    void sendByte(byte type) throws IOException {
        out.writeByte(type);
        out.flush();
    }

    /** The reply type (ACCEPT, REJECT, READY); -1 at the end of the stream. */
    int readType() throws IOException {
        return in.read();
    }

    /**
     * The reply type, running {@code progress} every few milliseconds while it has not come (the
     * worker must answer the peer's wire-up meanwhile); -1 at the end of the stream.
     *
     * @throws SocketTimeoutException after {@link #HANDSHAKE_MILLIS}
     */
    int readType(Runnable progress) throws IOException {
        long deadline = System.nanoTime() + HANDSHAKE_MILLIS * 1_000_000L;
        socket.setSoTimeout(2);
        try {
            while (true) {
                try {
                    return in.read();
                } catch (SocketTimeoutException notYet) {
                    if (System.nanoTime() > deadline) {
                        throw notYet;
                    }
                    progress.run();
                }
            }
        } finally {
            socket.setSoTimeout(HANDSHAKE_MILLIS);
        }
    }

    /** The rest of an ACCEPT. */
    Peer readAccept() throws IOException {
        return new Peer(in.readInt(), readBytes());
    }

    /**
     * Blocks until the peer closes the connection or goes away (no timeout): the connection's life
     * line. Returns normally in both cases.
     */
    void awaitEnd() {
        try {
            socket.setSoTimeout(0);
            InputStream s = socket.getInputStream();
            byte[] sink = new byte[64];
            while (s.read(sink) >= 0) {
                // nothing more is sent after the handshake; anything that comes is ignored
            }
        } catch (IOException gone) {
            // reset or closed here: the connection is over either way
        }
    }

    private void writeBytes(byte[] b) throws IOException {
        out.writeInt(b.length);
        out.write(b);
    }

    private byte[] readBytes() throws IOException {
        int n = in.readInt();
        if (n < 1 || n > MAX_WORKER_ADDRESS) {
            throw new IOException("worker address of " + n + " bytes (1 to " + MAX_WORKER_ADDRESS + ")");
        }
        byte[] b = new byte[n];
        in.readFully(b);
        return b;
    }

    /** The socket's keepalive settings: on, idle seconds, interval seconds, probes (for tests). */
    int[] keepalive() throws IOException {
        return new int[] {socket.getKeepAlive() ? 1 : 0, socket.getOption(jdk.net.ExtendedSocketOptions.TCP_KEEPIDLE),
                socket.getOption(jdk.net.ExtendedSocketOptions.TCP_KEEPINTERVAL),
                socket.getOption(jdk.net.ExtendedSocketOptions.TCP_KEEPCOUNT)};
    }

    @Override
    public void close() {
        closeQuietly(socket);
    }

    private static void closeQuietly(Socket s) {
        try {
            s.close();
        } catch (IOException ignored) {
            // closing: nothing to report
        }
    }
}
