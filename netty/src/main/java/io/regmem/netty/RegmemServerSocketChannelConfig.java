package io.regmem.netty;

import static io.netty.channel.ChannelOption.SO_BACKLOG;
import static io.netty.channel.ChannelOption.SO_RCVBUF;
import static io.netty.channel.ChannelOption.SO_REUSEADDR;

import io.netty.buffer.ByteBufAllocator;
import io.netty.channel.ChannelOption;
import io.netty.channel.DefaultChannelConfig;
import io.netty.channel.MessageSizeEstimator;
import io.netty.channel.RecvByteBufAllocator;
import io.netty.channel.WriteBufferWaterMark;
import io.netty.channel.socket.ServerSocketChannelConfig;
import java.util.Map;

/**
 * A {@link RegmemServerSocketChannel}'s configuration: Netty's channel options; {@code SO_BACKLOG},
 * {@code SO_REUSEADDR} are kept and reported (regmem's listener takes every request it is
 * sent). {@code SO_RCVBUF}, as a TCP listener's, is the accepted channels' own unless a
 * {@code childOption} sets theirs; unset, it reports their windows (the transport's) once registered.
 */
public final class RegmemServerSocketChannelConfig extends DefaultChannelConfig implements ServerSocketChannelConfig {
    private volatile int backlog = 128;
    private volatile boolean reuseAddress = true;
    private volatile int receiveBufferSize;
    private volatile int defaultReceiveBytes;

    RegmemServerSocketChannelConfig(RegmemServerSocketChannel channel) {
        super(channel);
    }

    @Override
    public Map<ChannelOption<?>, Object> getOptions() {
        return getOptions(super.getOptions(), SO_RCVBUF, SO_REUSEADDR, SO_BACKLOG);
    }

    @SuppressWarnings("unchecked")
    @Override
    public <T> T getOption(ChannelOption<T> option) {
        if (option == SO_RCVBUF) {
            return (T) Integer.valueOf(getReceiveBufferSize());
        } else if (option == SO_REUSEADDR) {
            return (T) Boolean.valueOf(isReuseAddress());
        } else if (option == SO_BACKLOG) {
            return (T) Integer.valueOf(getBacklog());
        }
        return super.getOption(option);
    }

    @Override
    public <T> boolean setOption(ChannelOption<T> option, T value) {
        validate(option, value);
        if (option == SO_RCVBUF) {
            setReceiveBufferSize((Integer) value);
        } else if (option == SO_REUSEADDR) {
            setReuseAddress((Boolean) value);
        } else if (option == SO_BACKLOG) {
            setBacklog((Integer) value);
        } else {
            return super.setOption(option, value);
        }
        return true;
    }

    @Override
    public int getBacklog() {
        return backlog;
    }

    @Override
    public RegmemServerSocketChannelConfig setBacklog(int backlog) {
        if (backlog < 0) {
            throw new IllegalArgumentException("backlog: " + backlog + " (expected: >= 0)");
        }
        this.backlog = backlog;
        return this;
    }

    @Override
    public boolean isReuseAddress() {
        return reuseAddress;
    }

    @Override
    public RegmemServerSocketChannelConfig setReuseAddress(boolean on) {
        this.reuseAddress = on;
        return this;
    }

    /** SO_RCVBUF's bytes, or what the accepted channels' windows are while unset (0 before registration). */
    @Override
    public int getReceiveBufferSize() {
        return receiveBufferSize > 0 ? receiveBufferSize : defaultReceiveBytes;
    }

    /** SO_RCVBUF if it was set (0: unset): the accepted channels' own, unless a {@code childOption} sets theirs. */
    int receiveBufferSizeSet() {
        return receiveBufferSize;
    }

    /** What SO_RCVBUF reports while unset: the transport's receive window, in bytes (on registration). */
    void defaultReceiveBytes(int bytes) {
        this.defaultReceiveBytes = bytes;
    }

    @Override
    public RegmemServerSocketChannelConfig setReceiveBufferSize(int bytes) {
        if (bytes < 0) {
            throw new IllegalArgumentException("receiveBufferSize: " + bytes + " (expected: >= 0)");
        }
        this.receiveBufferSize = bytes;
        return this;
    }

    @Override
    public RegmemServerSocketChannelConfig setPerformancePreferences(int connectionTime, int latency, int bandwidth) {
        return this;
    }

    @Override
    public RegmemServerSocketChannelConfig setConnectTimeoutMillis(int millis) {
        super.setConnectTimeoutMillis(millis);
        return this;
    }

    @Override
    @Deprecated
    public RegmemServerSocketChannelConfig setMaxMessagesPerRead(int n) {
        super.setMaxMessagesPerRead(n);
        return this;
    }

    @Override
    public RegmemServerSocketChannelConfig setWriteSpinCount(int n) {
        super.setWriteSpinCount(n);
        return this;
    }

    @Override
    public RegmemServerSocketChannelConfig setAllocator(ByteBufAllocator allocator) {
        super.setAllocator(allocator);
        return this;
    }

    @Override
    public RegmemServerSocketChannelConfig setRecvByteBufAllocator(RecvByteBufAllocator allocator) {
        super.setRecvByteBufAllocator(allocator);
        return this;
    }

    @Override
    public RegmemServerSocketChannelConfig setAutoRead(boolean autoRead) {
        super.setAutoRead(autoRead);
        return this;
    }

    @Override
    @Deprecated
    public RegmemServerSocketChannelConfig setWriteBufferHighWaterMark(int mark) {
        super.setWriteBufferHighWaterMark(mark);
        return this;
    }

    @Override
    @Deprecated
    public RegmemServerSocketChannelConfig setWriteBufferLowWaterMark(int mark) {
        super.setWriteBufferLowWaterMark(mark);
        return this;
    }

    @Override
    public RegmemServerSocketChannelConfig setWriteBufferWaterMark(WriteBufferWaterMark mark) {
        super.setWriteBufferWaterMark(mark);
        return this;
    }

    @Override
    public RegmemServerSocketChannelConfig setMessageSizeEstimator(MessageSizeEstimator estimator) {
        super.setMessageSizeEstimator(estimator);
        return this;
    }
}
