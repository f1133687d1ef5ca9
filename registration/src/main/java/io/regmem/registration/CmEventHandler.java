package io.regmem.registration;

/**
 * Receives an ID's connection events, synchronously, on the thread whose call caused them, after
 * regmem released its locks. As in the kernel, the handler must not destroy the ID the event is
 * for (that throws); it returns true instead, and regmem destroys the ID once the handler has
 * returned (for a connect request: rejecting it).
 */
@FunctionalInterface
public interface CmEventHandler {

    /**
     * @param event what happened
     * @return true to have the event's ID destroyed after this returns
     */
    boolean onEvent(CmEvent event);
}
