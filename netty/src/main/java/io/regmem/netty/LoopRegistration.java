package io.regmem.netty;

import io.netty.channel.ChannelPromise;
import io.netty.channel.EventLoop;
import io.netty.channel.IoEventLoop;
import io.netty.channel.IoRegistration;

/**
 * A channel's registration with its event loop's {@link RegmemIoHandler}, as both channel classes
 * keep it: registered in {@code doRegister}, cancelled in {@code doDeregister}; the handler it gives
 * is where the channel's connections live. Event loop only, but for {@link #accepts}.
 */
final class LoopRegistration {
    private IoRegistration registration;
    private RegmemIoHandler handler;
    /** The loop the channel stays on ({@link #pin}), or null. */
    private volatile EventLoop home;

    /**
     * Registers {@code handle} with {@code loop}'s handler; once registered, runs {@code then} (an
     * exception of it fails {@code promise}) and succeeds {@code promise}.
     */
    void register(EventLoop loop, RegmemIoHandler.RegmemIoHandle handle, ChannelPromise promise, Runnable then) {
        ((IoEventLoop) loop).register(handle).addListener(f -> {
            if (!f.isSuccess()) {
                promise.setFailure(f.cause());
                return;
            }
            registration = (IoRegistration) f.getNow();
            handler = registration.attachment();
            try {
                then.run();
            } catch (RuntimeException e) {
                promise.setFailure(e);
                return;
            }
            promise.setSuccess();
        });
    }

    /** The handler of the loop the channel is registered with (null before its registration). */
    RegmemIoHandler handler() {
        return handler;
    }

    /**
     * Keeps the channel on {@code loop} from now on: its handler's CQ carries the channel's connection,
     * and a QP never moves to another CQ, so a channel deregistered from it may register there again
     * and nowhere else (Netty refuses another loop as incompatible).
     */
    void pin(EventLoop loop) {
        home = loop;
    }

    /** True if the channel may register with {@code loop} (any thread). */
    boolean accepts(EventLoop loop) {
        EventLoop h = home;
        return h == null || h == loop;
    }

    /** Cancels the registration, if there is one. */
    void cancel() {
        IoRegistration r = registration;
        if (r != null) {
            registration = null;
            r.cancel();
        }
    }
}
