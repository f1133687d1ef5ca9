package io.regmem.netty;

import static io.netty.channel.ChannelOption.ALLOW_HALF_CLOSURE;
import static io.netty.channel.ChannelOption.IP_TOS;
import static io.netty.channel.ChannelOption.SO_KEEPALIVE;
import static io.netty.channel.ChannelOption.SO_LINGER;
import static io.netty.channel.ChannelOption.SO_RCVBUF;
import static io.netty.channel.ChannelOption.SO_REUSEADDR;
import static io.netty.channel.ChannelOption.SO_SNDBUF;
import static io.netty.channel.ChannelOption.TCP_NODELAY;

import io.netty.buffer.ByteBufAllocator;
import io.netty.channel.ChannelOption;
import io.netty.channel.DefaultChannelConfig;
import io.netty.channel.MessageSizeEstimator;
import io.netty.channel.RecvByteBufAllocator;
import io.netty.channel.WriteBufferWaterMark;
import io.netty.channel.socket.SocketChannelConfig;
import java.util.Map;

/**
 * A {@link RegmemSocketChannel}'s configuration: Netty's channel options, and the socket options a
 * TCP channel's pipeline sets, mapped onto the connection. {@code SO_RCVBUF} is the bytes of receives
 * the connection keeps posted (the credits its peer gets: bytes / the transport's {@code receiveSize},
 * 2 at least), {@code SO_SNDBUF} the bytes of SENDs it keeps outstanding (likewise): both take effect
 * when the connection is made, and while unset report the transport's ({@code receives} and
 * {@code sends} times {@code receiveSize}) once the channel is registered. {@code ALLOW_HALF_CLOSURE} is as TCP's. {@code SO_LINGER} bounds
 * how long a close lets the SENDs and chunks already posted finish before the connection disconnects
 * (seconds; -1, the default, two; 0 disconnects at once, dropping them). {@code TCP_NODELAY},
 * {@code SO_KEEPALIVE}, {@code SO_REUSEADDR} and {@code IP_TOS} are kept and reported, and change
 * nothing: every flush is sent at once, and the connection's life line tells a dead peer. {@code ALLOCATOR} defaults
 * to the transport's registered allocator (a buffer of it is sent without a copy).
 */
public final class RegmemSocketChannelConfig extends DefaultChannelConfig implements SocketChannelConfig {
    private volatile int receiveBufferSize;
    private volatile int sendBufferSize;
    /** The transport's windows in bytes, which SO_RCVBUF and SO_SNDBUF report while unset (0 before registration). */
    private volatile int defaultReceiveBytes;
    private volatile int defaultSendBytes;
    private volatile boolean allowHalfClosure;
    private volatile boolean tcpNoDelay = true;
    private volatile boolean keepAlive;
    private volatile boolean reuseAddress;
    private volatile int soLinger = -1;
    private volatile int trafficClass;
    private volatile boolean allocatorSet;

    RegmemSocketChannelConfig(RegmemSocketChannel channel) {
        super(channel);
    }

    @Override
    protected void autoReadCleared() {
        ((RegmemSocketChannel) channel).clearReadPending();
    }

    /** The transport's allocator, unless the application chose one. */
    void defaultAllocator(ByteBufAllocator alloc) {
        if (!allocatorSet) {
            super.setAllocator(alloc);
        }
    }

    /** What SO_RCVBUF and SO_SNDBUF report while unset: the transport's windows, in bytes (on registration). */
    void defaultWindows(int receiveBytes, int sendBytes) {
        this.defaultReceiveBytes = receiveBytes;
        this.defaultSendBytes = sendBytes;
    }

    /** Receives to post: SO_RCVBUF's bytes in receives of {@code receiveSize}, or {@code fallback} if unset. */
    int receives(int receiveSize, int fallback) {
        int b = receiveBufferSize;
        return b <= 0 ? fallback : Math.max(2, Math.min(4096, b / receiveSize));
    }

    /** SENDs to keep outstanding: SO_SNDBUF's bytes in pieces of {@code receiveSize}, or {@code fallback}. */
    int sends(int receiveSize, int fallback) {
        int b = sendBufferSize;
        return b <= 0 ? fallback : Math.max(2, Math.min(4096, b / receiveSize));
    }

    @Override
    public Map<ChannelOption<?>, Object> getOptions() {
        return getOptions(super.getOptions(), SO_RCVBUF, SO_SNDBUF, TCP_NODELAY, SO_KEEPALIVE, SO_REUSEADDR, SO_LINGER, IP_TOS,
                ALLOW_HALF_CLOSURE);
    }

    @SuppressWarnings("unchecked")
    @Override
    public <T> T getOption(ChannelOption<T> option) {
        if (option == SO_RCVBUF) {
            return (T) Integer.valueOf(getReceiveBufferSize());
        } else if (option == SO_SNDBUF) {
            return (T) Integer.valueOf(getSendBufferSize());
        } else if (option == TCP_NODELAY) {
            return (T) Boolean.valueOf(isTcpNoDelay());
        } else if (option == SO_KEEPALIVE) {
            return (T) Boolean.valueOf(isKeepAlive());
        } else if (option == SO_REUSEADDR) {
            return (T) Boolean.valueOf(isReuseAddress());
        } else if (option == SO_LINGER) {
            return (T) Integer.valueOf(getSoLinger());
        } else if (option == IP_TOS) {
            return (T) Integer.valueOf(getTrafficClass());
        } else if (option == ALLOW_HALF_CLOSURE) {
            return (T) Boolean.valueOf(isAllowHalfClosure());
        }
        return super.getOption(option);
    }

    @Override
    public <T> boolean setOption(ChannelOption<T> option, T value) {
        validate(option, value);
        if (option == SO_RCVBUF) {
            setReceiveBufferSize((Integer) value);
        } else if (option == SO_SNDBUF) {
            setSendBufferSize((Integer) value);
        } else if (option == TCP_NODELAY) {
            setTcpNoDelay((Boolean) value);
        } else if (option == SO_KEEPALIVE) {
            setKeepAlive((Boolean) value);
        } else if (option == SO_REUSEADDR) {
            setReuseAddress((Boolean) value);
        } else if (option == SO_LINGER) {
            setSoLinger((Integer) value);
        } else if (option == IP_TOS) {
            setTrafficClass((Integer) value);
        } else if (option == ALLOW_HALF_CLOSURE) {
            setAllowHalfClosure((Boolean) value);
        } else {
            return super.setOption(option, value);
        }
        return true;
    }

    @Override
    public int getReceiveBufferSize() {
        return receiveBufferSize > 0 ? receiveBufferSize : defaultReceiveBytes;
    }

    @Override
    public RegmemSocketChannelConfig setReceiveBufferSize(int bytes) {
        if (bytes < 0) {
            throw new IllegalArgumentException("receiveBufferSize: " + bytes + " (expected: >= 0)");
        }
        this.receiveBufferSize = bytes;
        return this;
    }

    @Override
    public int getSendBufferSize() {
        return sendBufferSize > 0 ? sendBufferSize : defaultSendBytes;
    }

    @Override
    public RegmemSocketChannelConfig setSendBufferSize(int bytes) {
        if (bytes < 0) {
            throw new IllegalArgumentException("sendBufferSize: " + bytes + " (expected: >= 0)");
        }
        this.sendBufferSize = bytes;
        return this;
    }

    @Override
    public boolean isTcpNoDelay() {
        return tcpNoDelay;
    }

    @Override
    public RegmemSocketChannelConfig setTcpNoDelay(boolean on) {
        this.tcpNoDelay = on;
        return this;
    }

    @Override
    public int getSoLinger() {
        return soLinger;
    }

    /** SO_LINGER in seconds: how long a close lets what was sent finish; -1 (the default): two seconds; 0: it disconnects at once. */
    @Override
    public RegmemSocketChannelConfig setSoLinger(int seconds) {
        if (seconds < -1) {
            throw new IllegalArgumentException("soLinger: " + seconds + " (expected: -1 for the default, or seconds >= 0)");
        }
        this.soLinger = seconds;
        return this;
    }

    /** How long a close lingers, in nanoseconds (SO_LINGER's seconds, or {@link Connection#LINGER_NANOS} while it is -1). */
    long lingerNanos() {
        int s = soLinger;
        return s < 0 ? Connection.LINGER_NANOS : s * 1_000_000_000L;
    }

    @Override
    public boolean isKeepAlive() {
        return keepAlive;
    }

    @Override
    public RegmemSocketChannelConfig setKeepAlive(boolean on) {
        this.keepAlive = on;
        return this;
    }

    @Override
    public int getTrafficClass() {
        return trafficClass;
    }

    @Override
    public RegmemSocketChannelConfig setTrafficClass(int tc) {
        this.trafficClass = tc;
        return this;
    }

    @Override
    public boolean isReuseAddress() {
        return reuseAddress;
    }

    @Override
    public RegmemSocketChannelConfig setReuseAddress(boolean on) {
        this.reuseAddress = on;
        return this;
    }

    @Override
    public RegmemSocketChannelConfig setPerformancePreferences(int connectionTime, int latency, int bandwidth) {
        return this;
    }

    @Override
    public boolean isAllowHalfClosure() {
        return allowHalfClosure;
    }

    @Override
    public RegmemSocketChannelConfig setAllowHalfClosure(boolean on) {
        this.allowHalfClosure = on;
        return this;
    }

    @Override
    public RegmemSocketChannelConfig setConnectTimeoutMillis(int millis) {
        super.setConnectTimeoutMillis(millis);
        return this;
    }

    @Override
    @Deprecated
    public RegmemSocketChannelConfig setMaxMessagesPerRead(int n) {
        super.setMaxMessagesPerRead(n);
        return this;
    }

    @Override
    public RegmemSocketChannelConfig setWriteSpinCount(int n) {
        super.setWriteSpinCount(n);
        return this;
    }

    @Override
    public RegmemSocketChannelConfig setAllocator(ByteBufAllocator allocator) {
        allocatorSet = true;
        super.setAllocator(allocator);
        return this;
    }

    @Override
    public RegmemSocketChannelConfig setRecvByteBufAllocator(RecvByteBufAllocator allocator) {
        super.setRecvByteBufAllocator(allocator);
        return this;
    }

    @Override
    public RegmemSocketChannelConfig setAutoRead(boolean autoRead) {
        super.setAutoRead(autoRead);
        return this;
    }

    @Override
    public RegmemSocketChannelConfig setAutoClose(boolean autoClose) {
        super.setAutoClose(autoClose);
        return this;
    }

    @Override
    public RegmemSocketChannelConfig setMessageSizeEstimator(MessageSizeEstimator estimator) {
        super.setMessageSizeEstimator(estimator);
        return this;
    }

    @Override
    public RegmemSocketChannelConfig setWriteBufferWaterMark(WriteBufferWaterMark mark) {
        super.setWriteBufferWaterMark(mark);
        return this;
    }
}
