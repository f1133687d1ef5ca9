package io.regmem.netty;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/** The byte stream the transport's tests write and check (byte {@code k} of it is {@code k % 251}), and an echo. */
final class PatternStream {
    private PatternStream() {
    }

    /** Writes bytes {@code from} to {@code from + size} of the stream into {@code m}; returns it. */
    static ByteBuf fill(ByteBuf m, long from, int size) {
        int b = (int) (from % 251);
        for (int k = 0; k < size; k++) {
            m.writeByte(b);
            b = b == 250 ? 0 : b + 1;
        }
        return m;
    }

    /** Checks that the bytes read are the stream (releasing them): how many so far, the first wrong one. */
    static final class Checker extends ChannelInboundHandlerAdapter {
        final AtomicLong read = new AtomicLong();
        final AtomicReference<String> wrong = new AtomicReference<>();

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf b = (ByteBuf) msg;
            long from = read.get() - b.readerIndex(); // (the event loop alone adds to it)
            int expect = (int) ((from + b.readerIndex()) % 251);
            for (int k = b.readerIndex(); k < b.writerIndex(); k++) {
                if (b.getByte(k) != (byte) expect && wrong.get() == null) {
                    wrong.set("byte " + (from + k) + " is " + b.getByte(k));
                }
                expect = expect == 250 ? 0 : expect + 1;
            }
            read.addAndGet(b.readableBytes());
            b.release();
        }
    }

    /**
     * Writes back what it reads, flushed at each {@code channelReadComplete}. Made with a sink, it keeps
     * the first exception that reaches it there and closes the channel; without, exceptions go on down
     * the pipeline.
     */
    @ChannelHandler.Sharable
    static final class Echo extends ChannelInboundHandlerAdapter {
        private final AtomicReference<Throwable> failure;

        Echo() {
            this(null);
        }

        Echo(AtomicReference<Throwable> failure) {
            this.failure = failure;
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            if (failure == null) {
                ctx.fireExceptionCaught(cause);
                return;
            }
            failure.compareAndSet(null, cause);
            ctx.close();
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ctx.write(msg);
        }

        @Override
        public void channelReadComplete(ChannelHandlerContext ctx) {
            ctx.flush();
        }
    }
}
