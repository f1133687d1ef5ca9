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
        for (int k = 0; k < size; k++) {
            m.writeByte((int) ((from + k) % 251));
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
            for (int k = b.readerIndex(); k < b.writerIndex(); k++) {
                long at = read.getAndIncrement();
                if (b.getByte(k) != (byte) (at % 251) && wrong.get() == null) {
                    wrong.set("byte " + at + " is " + b.getByte(k));
                }
            }
            b.release();
        }
    }

    /** Writes back what it reads, flushed at each {@code channelReadComplete}. */
    @ChannelHandler.Sharable
    static final class Echo extends ChannelInboundHandlerAdapter {
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
