package io.regmem.registration.spi;

import io.regmem.registration.SignatureAttrs;
import io.regmem.registration.SignatureError;

/**
 * An integrity MR's signature mapping ({@code ib_map_mr_sg_pi}) as a provider with signature
 * offload sees it: the data, the protection information, and where the first error is kept.
 */
public interface IntegrityView {

    /** The signature attributes of the last mapping, or null before one. */
    SignatureAttrs attrs();

    /** The data's iova: the one address an SGE through the MR may start at. */
    long dataIova();

    /** Data bytes (whole blocks). */
    long dataBytes();

    /** Protection-information bytes in memory (0 unless the memory domain is T10-DIF). */
    long protBytes();

    /** Bytes a transfer through the MR puts on (or takes from) the wire. */
    long wireBytes();

    /** Adds the pieces of the data pages to {@code out}; false if a page is unmapped or dead. */
    boolean dataPieces(Segments out);

    /** Adds the pieces of the protection pages to {@code out}; false if a page is unmapped or dead. */
    boolean protPieces(Segments out);

    /** Keeps the first signature error since the MR's last registration. */
    void signatureError(SignatureError error);

    /** True if an error is kept. */
    boolean hasSignatureError();
}
