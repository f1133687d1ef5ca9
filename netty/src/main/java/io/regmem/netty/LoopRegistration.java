package io.regmem.netty;

import io.netty.channel.ChannelPromise;
import io.netty.channel.EventLoop;
import io.netty.channel.IoEventLoop;
import io.netty.channel.IoRegistration;

/**
 * A channel's registration with its event loop's {@link RegmemIoHandler}, as both channel classes
 * keep it: registered in {@code doRegister}, cancelled in {@code doDeregister}; the handler it gives
 * is where the channel's connections live. Event loop only.
 */
final class LoopRegistration {
    private IoRegistration registration;
    private RegmemIoHandler handler;

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

    /** Cancels the registration, if there is one. */
    void cancel() {
        IoRegistration r = registration;
        if (r != null) {
            registration = null;
            r.cancel();
        }
    }
}
