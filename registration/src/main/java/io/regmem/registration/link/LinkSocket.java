package io.regmem.registration.link;

import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketAddress;
import java.net.SocketTimeoutException;
import jdk.net.ExtendedSocketOptions;

/**
 * The TCP socket under a {@link Link}: reads by deadline however the peer splits its bytes, a look
 * for the peer's end that keeps a byte read ahead for the next read, writes, and the life line's
 * keepalive. One thread at a time reads (the handshake's, then the life line's).
 */
final class LinkSocket implements AutoCloseable {
    /** TCP keepalive on the life line: probes after 5 s of silence, every 1 s, 3 unanswered end it. */
    static final int KEEPALIVE_IDLE_SECONDS = 5;
    static final int KEEPALIVE_INTERVAL_SECONDS = 1;
    static final int KEEPALIVE_PROBES = 3;

    private final Socket socket;
    private final InputStream in;
    private final OutputStream out;
    private final int timeoutMillis;
    /** A byte {@link #peerClosed()} read ahead, or -1. */
    private int peeked = -1;

    LinkSocket(Socket socket, int timeoutMillis) throws IOException {
        this.socket = socket;
        this.timeoutMillis = timeoutMillis;
        socket.setTcpNoDelay(true);
        socket.setSoTimeout(timeoutMillis);
        // A peer host that vanishes (power loss, a partition) sends no FIN: keepalive probes find
        // out within about 8 s and end the life line as a reset would.
        socket.setKeepAlive(true);
        try {
            socket.setOption(ExtendedSocketOptions.TCP_KEEPIDLE, KEEPALIVE_IDLE_SECONDS);
            socket.setOption(ExtendedSocketOptions.TCP_KEEPINTERVAL, KEEPALIVE_INTERVAL_SECONDS);
            socket.setOption(ExtendedSocketOptions.TCP_KEEPCOUNT, KEEPALIVE_PROBES);
        } catch (UnsupportedOperationException notHere) {
            // the platform's defaults (Linux: 2 hours) then
        }
        this.in = socket.getInputStream();
        this.out = socket.getOutputStream();
    }

    /** This end's {@code ip:port}. */
    String localAddress() {
        SocketAddress a = socket.getLocalSocketAddress();
        if (a instanceof InetSocketAddress i) {
            return i.getAddress().getHostAddress() + ":" + i.getPort();
        }
        return String.valueOf(a);
    }

    /** The peer's {@code ip:port}. */
    String peerAddress() {
        SocketAddress a = socket.getRemoteSocketAddress();
        if (a instanceof InetSocketAddress i) {
            return i.getAddress().getHostAddress() + ":" + i.getPort();
        }
        return String.valueOf(a);
    }

    /** Writes {@code bytes} at once. */
    void write(byte[] bytes) throws IOException {
        out.write(bytes);
        out.flush();
    }

    /**
     * True if the peer has closed its end of the connection (or it was reset): a look that waits at
     * most a millisecond. A byte that came meanwhile is kept for the next read.
     */
    boolean peerClosed() {
        if (peeked >= 0) {
            return false;
        }
        try {
            socket.setSoTimeout(1);
            try {
                int b = in.read();
                if (b < 0) {
                    return true;
                }
                peeked = b;
                return false;
            } catch (SocketTimeoutException notYet) {
                return false;
            } finally {
                socket.setSoTimeout(timeoutMillis);
            }
        } catch (IOException gone) {
            return true;
        }
    }

    /**
     * True if the peer closed its end of the connection or sent something ({@link #peerClosed()}): a
     * listener waiting for the requester to take a same-host lane stops waiting then.
     */
    boolean peerClosedOrSent() {
        return peerClosed() || peeked >= 0;
    }

    /**
     * One byte, the next message's type, running {@code progress} every few milliseconds while it has
     * not come; -1 at the end of the stream.
     */
    int readType(long deadline, Runnable progress) throws IOException {
        if (peeked >= 0) {
            int b = peeked;
            peeked = -1;
            return b;
        }
        socket.setSoTimeout(2);
        try {
            while (true) {
                try {
                    return in.read();
                } catch (SocketTimeoutException notYet) {
                    if (System.nanoTime() - deadline > 0) {
                        throw new SocketTimeoutException("no answer within " + timeoutMillis + " ms");
                    }
                    progress.run();
                }
            }
        } finally {
            socket.setSoTimeout(timeoutMillis);
        }
    }

    /** Reads exactly {@code b.length} bytes by {@code deadline}, however the peer splits them. */
    void readFully(byte[] b, long deadline, String message) throws IOException {
        int off = 0;
        if (peeked >= 0 && b.length > 0) {
            b[off++] = (byte) peeked;
            peeked = -1;
        }
        while (off < b.length) {
            long left = (deadline - System.nanoTime()) / 1_000_000L;
            if (left <= 0) {
                throw new SocketTimeoutException(message + " did not arrive whole within " + timeoutMillis + " ms");
            }
            socket.setSoTimeout((int) Math.min(Integer.MAX_VALUE, left));
            int n;
            try {
                n = in.read(b, off, b.length - off);
            } catch (SocketTimeoutException e) {
                throw new SocketTimeoutException(message + " did not arrive whole within " + timeoutMillis + " ms");
            }
            if (n < 0) {
                throw new EOFException(message + " ended after " + off + " of its bytes");
            }
            off += n;
        }
    }

    /**
     * Blocks until the peer closes the connection or goes away (no timeout): the connection's life
     * line. Returns normally in both cases.
     */
    void awaitEnd() {
        try {
            socket.setSoTimeout(0);
            byte[] sink = new byte[64];
            while (in.read(sink) >= 0) {
                // nothing more is sent after the handshake; anything that comes is ignored
            }
        } catch (IOException gone) {
            // reset or closed here: the connection is over either way
        }
    }

    /** The socket's keepalive settings: on, idle seconds, interval seconds, probes (for tests). */
    int[] keepalive() throws IOException {
        return new int[] {socket.getKeepAlive() ? 1 : 0, socket.getOption(ExtendedSocketOptions.TCP_KEEPIDLE),
                socket.getOption(ExtendedSocketOptions.TCP_KEEPINTERVAL),
                socket.getOption(ExtendedSocketOptions.TCP_KEEPCOUNT)};
    }

    @Override
    public void close() {
        closeQuietly(socket);
    }

    static void closeQuietly(Socket s) {
        try {
            s.close();
        } catch (IOException ignored) {
            // closing: nothing to report
        }
    }
}
