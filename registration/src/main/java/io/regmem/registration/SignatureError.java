package io.regmem.registration;

/**
 * The first protection-information mismatch a transfer through an integrity MR found
 * ({@code struct ib_sig_err}).
 *
 * @param kind        which field of the tuple disagreed
 * @param blockOffset the byte offset, in the data, of the failing block
 * @param expected    the value the block's tuple carries (what its writer computed)
 * @param actual      the value computed from the bytes that arrived (guard), or the one the
 *                    transfer expected (tags)
 */
public record SignatureError(Kind kind, long blockOffset, int expected, int actual) {
    /** The failing field. */
    public enum Kind {
        /** CRC-16/T10-DIF guard. */
        GUARD,
        /** Application tag. */
        APP_TAG,
        /** Reference tag. */
        REF_TAG
    }
}
