package io.regmem.registration.uring;

/**
 * Receives the completions an {@link IoRing} reaps, on the ring's owner thread.
 *
 * <p>Pass the same instance to every {@link IoRing#poll poll} (a lambda that captures nothing, or a
 * field): reaping then allocates nothing.
 */
@FunctionalInterface
public interface IoCompletionHandler {

    /**
     * One finished operation.
     *
     * @param userData what the submitter passed with the operation
     * @param result   bytes transferred (0 for {@code fsync}), or a negative Linux errno: the
     *                 kernel's verdict ({@code -EIO}, {@code -EFAULT}, {@code -EINVAL}...);
     *                 {@link IoRing#errno(int)} names it
     */
    void onComplete(long userData, int result);
}
