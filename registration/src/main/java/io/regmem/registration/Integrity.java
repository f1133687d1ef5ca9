package io.regmem.registration;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.core.ScatterList;
import io.regmem.registration.spi.IntegrityView;
import io.regmem.registration.spi.Segments;

/**
 * The signature mapping of an integrity MR ({@code ib_map_mr_sg_pi}): the data pages come first in
 * the MR's page list, the protection pages after them. What a transfer through the MR does with
 * them (T10-PI generation, checks, the wire image) is the provider's signature offload
 * ({@link io.regmem.registration.spi.SignatureOffload}); the first failing block is kept here for
 * {@link MemoryRegion#checkSignatureStatus()}.
 */
final class Integrity implements IntegrityView {
    private final MemoryRegion mr;
    final int maxData;
    final int maxMeta;
    private volatile SignatureAttrs attrs;
    private long dataIova;
    private long dataBytes;
    private int dataPages;
    private long protIova;
    private long protBytes;
    private volatile SignatureError error;

    Integrity(MemoryRegion mr, int maxData, int maxMeta) {
        this.mr = mr;
        this.maxData = maxData;
        this.maxMeta = maxMeta;
    }

    void map(ScatterList data, int dataCount, ScatterList prot, int protCount, SignatureAttrs a, long pageSz) {
        boolean memPi = a != null && a.memory() == SignatureAttrs.Domain.T10_DIF;
        if (a == null || data == null || dataCount < 1 || dataCount > data.count()
                || (memPi ? prot == null || protCount < 1 || protCount > prot.count() : prot != null || protCount != 0)
                || Long.bitCount(pageSz) != 1) {
            throw new RdmaException(Errno.EINVAL, mr + ": mapSgPi(" + dataCount + " data, " + protCount + " protection "
                    + "elements, " + a + "): data is required, and a protection list exactly when memory is T10_DIF");
        }
        int d = mr.pageList.map(data, 0, dataCount, 0, pageSz, 0, maxData);
        long iova = mr.pageList.iova;
        long bytes = mr.pageList.bytes;
        int end = mr.pageList.end;
        int dataEnd = end;
        if (d < dataCount) {
            throw new RdmaException(Errno.EINVAL, mr + ": data element " + d + " does not map (unaligned inside the "
                    + "transfer, or more than " + maxData + " pages)");
        }
        if (bytes % a.blockSize() != 0) {
            throw new RdmaException(Errno.EINVAL, mr + ": " + bytes + " data bytes are not whole blocks of " + a.blockSize());
        }
        long pIova = 0;
        long pBytes = 0;
        if (memPi) {
            int p = mr.pageList.map(prot, 0, protCount, 0, pageSz, end, end + maxMeta);
            if (p < protCount) {
                throw new RdmaException(Errno.EINVAL, mr + ": protection element " + p + " does not map");
            }
            pIova = mr.pageList.iova;
            pBytes = mr.pageList.bytes;
            if (pBytes != a.protBytes(bytes)) {
                throw new RdmaException(Errno.EINVAL, mr + ": " + pBytes + " protection bytes for " + bytes / a.blockSize()
                        + " blocks; " + a.protBytes(bytes) + " needed (8 per block)");
            }
            end = mr.pageList.end;
        }
        this.attrs = a;
        this.dataIova = iova;
        this.dataBytes = bytes;
        this.dataPages = dataEnd;
        this.protIova = pIova;
        this.protBytes = pBytes;
        mr.commitIntegrityMapping(iova, bytes, end);
    }

    @Override
    public SignatureAttrs attrs() {
        return attrs;
    }

    @Override
    public long dataIova() {
        return dataIova;
    }

    @Override
    public long dataBytes() {
        return dataBytes;
    }

    @Override
    public long protBytes() {
        return protBytes;
    }

    @Override
    public long wireBytes() {
        SignatureAttrs a = attrs;
        return a == null ? 0 : a.wireBytes(dataBytes);
    }

    @Override
    public boolean dataPieces(Segments out) {
        return Translation.pagePieces(mr, 0, dataIova, 0, dataBytes, out);
    }

    @Override
    public boolean protPieces(Segments out) {
        return protBytes == 0 || Translation.pagePieces(mr, dataPages, protIova, 0, protBytes, out);
    }

    @Override
    public void signatureError(SignatureError e) {
        if (error == null) {
            error = e;
        }
    }

    @Override
    public boolean hasSignatureError() {
        return error != null;
    }

    void registered() {
        error = null;
    }

    SignatureError takeError() {
        SignatureError e = error;
        error = null;
        return e;
    }
}
