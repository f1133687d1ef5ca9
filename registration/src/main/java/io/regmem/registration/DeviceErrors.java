package io.regmem.registration;

import org.agrona.ErrorHandler;

/** A device's {@link ErrorHandler} for asynchronous failures, and the reporting of them. */
final class DeviceErrors {
    private volatile ErrorHandler handler;

    ErrorHandler handler() {
        return handler;
    }

    void handler(ErrorHandler h) {
        handler = h;
    }

    /**
     * Hands {@code error} to the handler, if one is set; true if it did. A handler that throws is
     * not allowed to break the thread that reported (a provider's, or a poller's): what it threw is
     * dropped, with a line in the log.
     */
    boolean report(Throwable error) {
        ErrorHandler h = handler;
        if (h == null) {
            return false;
        }
        try {
            h.onError(error);
        } catch (Throwable t) {
            System.getLogger(RdmaDevice.class.getName()).log(System.Logger.Level.WARNING,
                    "regmem: the device's error handler threw " + t + " on " + error);
        }
        return true;
    }
}
